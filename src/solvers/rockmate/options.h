// options.h — rk-Checkmate (Rockmate §3.3, App. B; specs §4.4): the options of each class of
// identical blocks. An option is one way to run a block: its forward run, then (after the blocks
// above it) its backward run, which may recompute forward nodes whose values were not kept.
// Keep-all (every node once, everything the backward reads kept) and keep-nothing (the forward
// recomputed in full before the backward) are always there; the rest come from the value-level
// fixed-order MILP (checkmate_model/formulation.h) on the block with a loss placeholder between
// forward and backward, over a grid of (M_peak, M_save) budgets, and from a greedy series that
// drops, one at a time, the kept value freeing the most bytes at the loss per unit of
// recomputation (where CBC finds nothing in a grid point's time; also the MILPs' warm starts).
// Options are cached by class hash in the caller's SolveCache and, with a cache directory, on
// disk, so a second solve re-runs no MILP. Built without CBC there is no MILP (milp_available()).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "blocks/blocks.h"
#include "remat/solver.h"
#include "remat/toolkit.h"

namespace remat::rockmate {

// Runs as positions in Block::nodes, so one option serves every block of its class.
struct LocalOption {
  std::vector<int32_t> forward, backward;
  bool operator==(const LocalOption&) const = default;
};

struct OptionParams {
  int32_t peak_points = 10;  // M_peak values on the grid
  int32_t save_points = 10;  // M_save values per M_peak
  // Per MILP: the work limit, which stops it at the same point on any machine, and a wall-clock
  // backstop (also for the repair of keep-all that seeds each M_peak row).
  int64_t milp_iterations = 1000;  // simplex iterations (milp::MilpOptions::iteration_limit)
  double milp_time_limit_s = 5;
  double milp_gap = 0.02;  // relative gap at which a MILP stops (CBC -ratio)
  // Blocks whose model would have more columns get no MILP (their starts are the options):
  // Clp's presolve alone, which no time limit interrupts, took minutes on DenseNet's blocks.
  int64_t milp_max_columns = 100'000;
  std::string cache_dir;  // empty: memory only
  int threads = 1;        // MILPs in parallel
  bool milp = true;       // false: keep-all and keep-nothing only
};

struct OptionStats {
  int64_t milp_runs = 0;           // MILPs solved (all classes)
  int64_t milp_feasible = 0;       // with a plan
  int64_t milp_reused = 0;         // grid points served by the plan of a looser point (no MILP)
  int64_t options_from_start = 0;  // MILPs that found nothing: their start kept
  int64_t options_greedy = 0;      // plans from the greedy drops (before duplicates and dominance)
  int64_t classes_too_large = 0;   // classes past milp_max_columns: no MILP
  int64_t memory_hits = 0, disk_hits = 0;  // classes served from the caches
  bool timed_out = false;        // the grid stopped at the deadline (its options are not cached)
  bool grid_work_limit = false;  // a class's share of the work ended its grid (not cached)
  double work = 0;  // work units the grids spent (a cached grid: what it spent when computed)
  // MILPs and repairs that the wall clock ended instead of their work limit: where it is not 0
  // the options, and so the plan, may differ on a faster or less loaded machine.
  int64_t wall_clock_stops = 0;
  int64_t work_limit_stops = 0;  // MILPs that milp_iterations ended (the same on any machine)
  std::vector<int64_t> runs_per_class;  // MILPs per class (0 when cached)
};

// Whether rk-Checkmate can run: the MILP needs CBC (REMAT_WITH_CBC). Without it every class has
// keep-all and keep-nothing only, and the solver's stats say so.
bool milp_available();

// The options of every class (by class id), keep-all first, keep-nothing second. The classes
// with a grid share the work `limits` has left evenly and its clock; `cache` (may be null) keeps
// complete grids between solves, and a class it serves counts the work its grid spent, so the
// options and the work reported are those of a solve without the cache.
std::vector<std::vector<LocalOption>> class_options(const Graph& graph, const BlockStructure& bs,
                                                    const OptionParams& params,
                                                    const Limits& limits, SolveCache* cache,
                                                    OptionStats& stats);

}  // namespace remat::rockmate
