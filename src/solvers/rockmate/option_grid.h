// option_grid.h — internal to rockmate: the (M_peak, M_save) grid of one class of blocks, each
// point solved by checkmate's value-level MILP with one more row (memory at the loss step <=
// M_save), warm-started and backed by greedy plans; each solution is a sequence of the block graph.
#pragma once

#include <cstdint>
#include <vector>

#include "block_model.h"
#include "options.h"
#include "remat/plan.h"
#include "remat/toolkit.h"

namespace remat::rockmate {

struct ClassResult {
  std::vector<Sequence> plans;  // sub-graph sequences found, in grid order
  int64_t runs = 0, feasible = 0, reused = 0;
  int64_t from_start = 0;        // points whose MILP found nothing: their warm start kept
  int64_t greedy = 0;            // plans of greedy_drop_plans
  bool too_large = false;        // past milp_max_columns: no MILP ran, the starts are the options
  int64_t wall_clock_stops = 0;  // MILPs and repairs the wall clock ended (see OptionStats)
  int64_t work_limit_stops = 0;  // MILPs that milp_iterations ended
  bool cut_short = false;        // the class's share of the work or the clock ended the grid
  double work = 0;               // work units spent
};

// The grid's M_peak values, ascending; sets bm.save_low, the lowest M_save.
std::vector<int64_t> peak_grid(BlockModel& bm, int32_t points);

// The grid of one class (built without CBC: never called, milp_available() is false).
ClassResult solve_class(const BlockModel& bm, const std::vector<int64_t>& grid, int32_t save_points,
                        const OptionParams& params, Limits& limits, uint64_t seed);

}  // namespace remat::rockmate
