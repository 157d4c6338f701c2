#include "remat/interrupt.h"

#include <atomic>

namespace remat {
namespace {

std::atomic<bool> interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "used from a signal handler");

// The innermost InterruptPoll of this thread (solves may nest: auto runs its members).
thread_local InterruptPoll* active_poll = nullptr;

}  // namespace

bool request_interrupt() noexcept { return interrupted.exchange(true, std::memory_order_relaxed); }

bool interrupt_requested() noexcept {
  if (interrupted.load(std::memory_order_relaxed)) return true;
  return active_poll != nullptr && active_poll->check();
}

void clear_interrupt() noexcept { interrupted.store(false, std::memory_order_relaxed); }

InterruptPoll::InterruptPoll(Function poll, void* context)
    : poll_(poll), context_(context), next_(std::chrono::steady_clock::now()), outer_(active_poll) {
  active_poll = this;
}

InterruptPoll::~InterruptPoll() {
  active_poll = outer_;
  if (!fired_) return;
  if (outer_ != nullptr)
    outer_->fired_ = true;  // the enclosing solve stops too; its poll clears the flag
  else
    clear_interrupt();
}

bool InterruptPoll::check() noexcept {
  if (fired_) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_) return false;
  next_ = now + kInterruptPollInterval;
  if (!poll_(context_)) return false;
  fired_ = true;
  request_interrupt();
  return true;
}

}  // namespace remat
