// interrupt.h — a process-wide "stop now" flag. The `remat` command sets it from its SIGINT
// handler; Deadline::expired() reads it, so every solver that honours its time limit stops at the
// next check and returns its best plan so far. Async-signal-safe: a lock-free atomic.
#pragma once

namespace remat {

// Sets the flag (safe to call from a signal handler).
void request_interrupt() noexcept;
// True once request_interrupt() was called.
bool interrupt_requested() noexcept;
// Clears the flag (tests; a long-lived process between runs).
void clear_interrupt() noexcept;

}  // namespace remat
