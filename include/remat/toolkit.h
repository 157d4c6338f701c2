// toolkit.h — what every solver shares, in remat_core so any solver library can use it without
// linking the registry: the time limit (Deadline), per-chain seeds (derive_seed) and the one
// "better plan" rule every solver and the judged solve() use to choose between two plans.
//   const Deadline deadline(options.time_limit_s);
//   if (better_plan({e.peak_bytes, e.cost}, {best.peak_bytes, best.cost}, budget)) best = e;
#pragma once

#include <chrono>
#include <cstdint>

#include "remat/interrupt.h"

namespace remat {

// A wall-clock limit started at construction (time_limit_s of the solve options).
class Deadline {
 public:
  explicit Deadline(double seconds);
  // Also true once the run was interrupted (remat/interrupt.h: the CLI's first SIGINT).
  bool expired() const { return interrupt_requested() || std::chrono::steady_clock::now() >= end_; }
  double elapsed_s() const;

 private:
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point end_;
};

// Seed for independent chain `index` derived from the user seed (SplitMix64).
uint64_t derive_seed(uint64_t seed, uint64_t index);

// What the better-plan rule looks at: the simulator's peak and cost (graph cost or chain
// makespan, same unit on both sides of a comparison).
struct PlanScore {
  int64_t peak_bytes = 0;
  double cost = 0;
};

// True when `a` is a better plan than `b` for `budget_bytes`: a plan within budget beats one
// over it; within budget the cheaper wins, over budget the lower peak wins; a tie on that goes
// to the other figure (lower peak, resp. lower cost). Equal plans: false (keep the first one).
bool better_plan(PlanScore a, PlanScore b, int64_t budget_bytes);

}  // namespace remat
