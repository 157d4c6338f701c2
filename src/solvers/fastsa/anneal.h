// anneal.h — one simulated-annealing stage of FastSA over a unit table (Figure 3, App. D.4).
// Each iteration tries one mutation (add a unit at a random nop, remove the unit of a random
// occupied slot, or move one to a random nop), keeps it if the objective does not rise, or with
// probability exp(-Δf / h) if it does, and otherwise undoes it (SaState::undo_last: the state
// the inverse mutation would leave, the tree taken back from a log). The temperature falls
// geometrically from h_i to h_f. The best state (within budget and cheapest, else lowest peak) is
// kept through a log of slot changes, replayed onto a copy when a new best is found, so keeping it
// costs O(1) per accepted move.
//   StageResult r = run_stage(units, units.initial_order, settings, context);
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "remat/random.h"
#include "remat/solver.h"
#include "units.h"

namespace remat::fastsa {

enum class Objective {
  kProduct,  // max(budget, M) * C, equation (1)
  kStrict,   // L(Elu(L^-1(M))) * C^e, footnote 2 (e = 0.6)
  kMemory,   // M (Appendix B.2, memory-minimising order)
};

// What the objective is computed from (the soft peak when the log-add-exp tree is on).
struct ObjectiveFunction {
  Objective kind = Objective::kStrict;
  double budget = 1;
  // kStrict's cost exponent: the paper's 0.6, or 0 where only memory matters (the memory pass
  // of stage 1, fastsa.cc).
  double cost_exponent = 0.6;
  // memory_term(peak) * cost_term(cost).
  double operator()(double peak, double cost) const;
  double memory_term(double peak) const;
  double cost_term(double cost) const;
};

struct StageSettings {
  int64_t iterations = 0;
  // Absolute temperatures; when initial_temperature <= 0 it is initial_temperature_fraction times
  // the objective of the start state.
  double initial_temperature = 0;
  double initial_temperature_fraction = 1e-3;
  double final_temperature_ratio = 1e-4;  // h_f / h_i
  bool stop_when_feasible = false;        // stage 1: stop once the peak fits the budget
  bool rotations_only = false;            // Appendix B.2
  // Adds and removes only, never of a unit's first production (mode=fixed-order).
  bool fixed_order = false;
  // Rotations draw the target slot within the unit's valid range (state.h move_range) instead
  // of anywhere: with rotations only, a uniform target is valid a few % of the time.
  bool local_rotations = false;
  // Once the state fits the budget, reject every mutation that would take it over (stage 2:
  // the objective is continuous at the budget and would trade a little memory for cost).
  bool keep_within_budget = false;
  // For grouped units: the simulator's peak of a unit sequence expanded to nodes (see
  // fits_exactly in anneal.cc); empty when the state's peak is exact.
  std::function<int64_t(const std::vector<int32_t>&)> exact_peak;
  // exact_peak is called at a new lowest state peak only once it is this many bytes below the
  // last one checked, and by 1/64 of that one's distance to the budget (anneal.cc,
  // kExactCheckGapShare; 0 here: the distance alone decides).
  int64_t exact_peak_step = 0;
  int32_t slots = 1 << 16;
  double soft_peak_scale = 0;  // > 0: objective on the log-add-exp peak (App. C.2)
  // The share of proposals drawn around the peak slot (see peak_proposal in anneal.cc): a
  // recomputation of a value live across the peak between the peak and a use after it.
  // 0: every proposal uniform (§2.2).
  double peak_moves = 0;
  // > 0: the stage ends once the goal (within budget, then cost; over budget, peak) has not
  // improved for this many iterations. 0: it runs all `iterations`.
  int64_t convergence_window = 0;
  // Once the convergence window has fired while the schedule is still hot (the quench, anneal.cc
  // Annealer::run), the stage cools all the way to its final temperature before the window may end
  // it. For a stage that starts hot from a cold plan (the memory pass of stage 1, fastsa.cc): its
  // walk first climbs far above the plan it started from, so on a large graph no window sees a new
  // best before the quench, and one more window without one would end it still above that plan.
  bool quench_in_full = false;
  // > 0: the stage ends after this many iterations, its schedule unchanged (the temperatures
  // fall as over all `iterations`, so the run is the full one cut short). 0: no cap.
  int64_t iteration_cap = 0;
  // The stage ends once its best plan fits the budget at this cost (the graph's cost lower
  // bound: every needed node once), which no plan can beat. 0: never.
  double least_cost = 0;
};

// The moves of the work limit's unit (SolveOptions::work_limit): about a second of annealing on
// the reference workload (docs/limits.md; bench/work_unit_bench.cc measures it). A simulation of
// the plan (grouped stage 1's exact peak checks) counts kMovesPerSimulatedStep per step.
inline constexpr double kMovesPerUnit = 4e6;
inline constexpr double kMovesPerSimulatedStep = 0.25;
// A move on a state of more slots than this costs more CPU (its trees and slot arrays leave the
// caches): it counts move_weight(slots) moves, so that a unit is about the same CPU time on a
// graph of 100,000 nodes as on one of 1,000 (work_unit_bench --fastsa-sizes measures it).
inline constexpr int32_t kReferenceSlots = 1 << 16;
// (slots / kReferenceSlots)^0.4, at least 1.
double move_weight(int32_t slots);
// A move updates the memory of each input and output of its unit, and a simulated step reads
// each of its node's: on units with more of them than kReferenceDegree on average (random layered
// graphs of 100,000 nodes have about 39, joint training graphs about 3), a move and a step count
// degree_weight(units) times as much, so that a unit stays about the same CPU time there
// (bench/auto_speed_bench.py: random-layered_100000).
inline constexpr double kReferenceDegree = 8;
// (mean inputs and outputs per unit / kReferenceDegree)^0.5, at least 1.
double degree_weight(const UnitTable& units);

// Shared by the stages of one walk.
struct WalkContext {
  ObjectiveFunction objective;
  int64_t budget_bytes = 0;
  Rng rng{1};
  const Deadline* deadline = nullptr;
  // The walk's work limit in moves, left to its later stages (simulated steps count too).
  int64_t moves_left = std::numeric_limits<int64_t>::max();
  // Whether a limit cut any stage of the walk short.
  bool work_limit_hit = false, time_limit_hit = false;
  std::function<void(const Progress&)> on_progress;  // empty except on the reporting walk
  double progress_every_s = 0.25;
  // Convergence series over the walk (both stages).
  std::vector<double> series_time_s, series_iteration, series_best_objective, series_peak;
  int64_t iterations_before = 0;  // iterations of earlier stages, for the series
};

struct StageResult {
  std::vector<int32_t> best_order;  // units, nops removed
  int64_t best_peak = 0;            // the state's own figures; the simulator re-judges them
  double best_cost = 0;
  int64_t iterations = 0;
  int64_t accepted = 0;
  int64_t applied = 0;  // valid mutations (accepted or undone)
  double seconds = 0;
  double initial_temperature = 0;  // h_i of the schedule
  double final_temperature = 0;    // h_f of the schedule
  double stop_temperature = 0;     // the temperature when the stage ended (early or not)
  bool time_limit_hit = false;
  bool work_limit_hit = false;  // the walk's moves ran out before the stage ended
  bool converged = false;       // ended by the convergence window
  bool at_least_cost = false;   // ended within budget at StageSettings::least_cost
  bool capped = false;          // ended at StageSettings::iteration_cap
};

StageResult run_stage(const UnitTable& units, std::span<const int32_t> start_order,
                      const StageSettings& settings, std::string_view stage_name,
                      WalkContext& context);

}  // namespace remat::fastsa
