// toolkit.h — what every solver shares, in remat_core so any solver library can use it without
// linking the registry: the time limit (Deadline), the work limit beside it (Limits, work_ops),
// per-chain seeds (derive_seed) and the one "better plan" rule every solver and the judged
// solve() use to choose between two plans.
//   Limits limits(options.work_limit, options.time_limit_s);
//   const int64_t moves = work_ops(limits.left(), kMovesPerUnit);  // then count them
//   if (better_plan({e.peak_bytes, e.cost}, {best.peak_bytes, best.cost}, budget)) best = e;
#pragma once

#include <chrono>
#include <cstdint>

#include "remat/interrupt.h"
#include "remat/plan.h"

namespace remat {

// A wall-clock limit started at construction (time_limit_s of the solve options).
class Deadline {
 public:
  explicit Deadline(double seconds);
  double limit_s() const { return limit_s_; }
  // Also true once the run was interrupted (remat/interrupt.h: the CLI's first SIGINT).
  bool expired() const { return interrupt_requested() || std::chrono::steady_clock::now() >= end_; }
  double elapsed_s() const;

 private:
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point end_;
  double limit_s_;
};

// The simulator's work (simulate, simulate_chain) in steps per work unit, for solvers whose
// operations are simulations of plans (docs/limits.md; bench/work_unit_bench.cc measures it).
inline constexpr double kSimulatedStepsPerUnit = 5e7;

// A solver's work limit in its own operations: `work_units` (SolveOptions::work_limit) at
// `ops_per_unit`, the rate its calibration measured (docs/limits.md). Never below 1; saturates at
// 2^62 for an unlimited or huge limit.
int64_t work_ops(double work_units, double ops_per_unit);

// The two limits of a solve and the work spent against them: the work limit (units of
// SolveOptions::work_limit, the deterministic stop: a solver counts its own operations and spends
// them at its calibrated rate) and the wall clock (time_limit_s, the backstop, which also expires
// on an interrupt). Parts of a solve take shares of what is left (part_work, seconds_left) and
// spend what they report (SolveStats::work).
class Limits {
 public:
  Limits(double work_units, double seconds) : deadline_(seconds), work_(work_units) {}
  // With the clock of an enclosing part (the same end).
  Limits(double work_units, const Deadline& deadline) : deadline_(deadline), work_(work_units) {}

  void spend(double units) { spent_ += units; }
  double spent() const { return spent_; }
  double left() const { return spent_ < work_ ? work_ - spent_ : 0; }
  bool out_of_work() const { return spent_ >= work_ || work_limit_hit_; }
  // Records that the work limit cut a part short (its share of the work ran out).
  void note_work_limit() { work_limit_hit_ = true; }
  bool expired() const { return deadline_.expired(); }
  // Either limit reached: stop now.
  bool stop() const { return out_of_work() || expired(); }
  const Deadline& deadline() const { return deadline_; }
  double seconds_left() const;
  // Limits for a part of the solve: `share` of the work and of the seconds left (so the clock
  // keeps the same margin over the work in every part). The caller spends what it spent.
  Limits part(double share) const { return Limits(share * left(), share * seconds_left()); }
  // Why stop() holds (the clock before the work, as the more machine-dependent reason), or
  // kConverged when it does not.
  StopReason reason() const;

 private:
  Deadline deadline_;
  double work_;
  double spent_ = 0;
  bool work_limit_hit_ = false;
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
