// interrupt.h — a process-wide "stop now" flag. The `remat` command sets it from its SIGINT
// handler; Deadline::expired() reads it, so every solver that honours its time limit stops at the
// next check and returns its best plan so far. Async-signal-safe: a lock-free atomic.
//
// A host that learns of an interrupt some other way (Python: a pending KeyboardInterrupt, which
// only the interpreter can see) installs an InterruptPoll around the solve; interrupt_requested()
// then also asks it, on the installing thread, at most every kInterruptPollInterval.
#pragma once

#include <chrono>

namespace remat {

// Sets the flag; returns whether it was already set (safe to call from a signal handler).
bool request_interrupt() noexcept;
// True once request_interrupt() was called, or when this thread's InterruptPoll says so. Not for
// signal handlers (request_interrupt() tells a handler whether the flag was set).
bool interrupt_requested() noexcept;
// Clears the flag (tests; a long-lived process between runs).
void clear_interrupt() noexcept;

inline constexpr std::chrono::milliseconds kInterruptPollInterval{20};

// While it lives, interrupt_requested() on this thread calls `poll(context)` at most every
// kInterruptPollInterval; once poll returns true the flag is set (so the solver's other threads
// stop too) and the destructor clears it again. `poll` must not throw.
class InterruptPoll {
 public:
  using Function = bool (*)(void* context) noexcept;
  InterruptPoll(Function poll, void* context);
  ~InterruptPoll();
  InterruptPoll(const InterruptPoll&) = delete;
  InterruptPoll& operator=(const InterruptPoll&) = delete;
  // Whether poll returned true.
  bool fired() const { return fired_; }
  // Called by interrupt_requested(); true when poll fired.
  bool check() noexcept;

 private:
  Function poll_;
  void* context_;
  bool fired_ = false;
  std::chrono::steady_clock::time_point next_;
  InterruptPoll* outer_;
};

}  // namespace remat
