#include "remat/interrupt.h"

#include <atomic>

namespace remat {
namespace {

std::atomic<bool> interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "used from a signal handler");

}  // namespace

void request_interrupt() noexcept { interrupted.store(true, std::memory_order_relaxed); }
bool interrupt_requested() noexcept { return interrupted.load(std::memory_order_relaxed); }
void clear_interrupt() noexcept { interrupted.store(false, std::memory_order_relaxed); }

}  // namespace remat
