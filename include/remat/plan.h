// plan.h — what a solver returns: a sequence of node executions and statistics about the search.
// A node appearing twice in the sequence is a recomputation. Peak and cost are never stored here:
// they come from simulate() (simulate.h), the one judge of a plan.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "remat/ids.h"

namespace remat {

using Sequence = std::vector<NodeId>;

enum class SolveStatus {
  kOptimal,     // within budget, least cost proved
  kFeasible,    // within budget, no proof
  kOverBudget,  // the lowest-peak plan found is still over budget; it is returned anyway
  kInfeasible,  // proved that no plan fits (budget below the memory lower bound)
};
std::string_view to_string(SolveStatus status);
std::optional<SolveStatus> parse_solve_status(std::string_view text);

// Why the search stopped, from the least to the most machine-dependent. A plan from a search that
// converged or hit a work limit is the same on any machine; one the clock stopped depends on how
// far the search got.
enum class StopReason {
  kConverged,    // it finished: converged, proved, or ran its schedule to the end
  kWorkLimit,    // a work limit (iterations, simplex iterations) ended part of it
  kTimeLimit,    // the wall clock ended part of it
  kInterrupted,  // the user interrupted it (the CLI's first SIGINT, remat/interrupt.h)
};
std::string_view to_string(StopReason reason);  // "converged", "work_limit", ...
std::optional<StopReason> parse_stop_reason(std::string_view text);

struct SolveStats {
  SolveStatus status = SolveStatus::kFeasible;
  StopReason stop_reason = StopReason::kConverged;
  double wall_time_s = 0;
  // Work units the solve spent (SolveOptions::work_limit): counted, so the same on any machine
  // for a search that converged or hit its work limit.
  double work = 0;
  int64_t iterations = 0;
  std::optional<double> cost_lower_bound;      // proven, when the solver has one
  std::optional<int64_t> min_feasible_budget;  // smallest budget the solver can meet, if known
  std::vector<std::pair<std::string, double>> counters;  // "accepted_moves", "dp_cells", ...
  // Numeric series, e.g. best objective over time for a convergence plot.
  std::vector<std::pair<std::string, std::vector<double>>> series;
  // Named lists of names, e.g. the values a min-cut plan saves.
  std::vector<std::pair<std::string, std::vector<std::string>>> lists;

  void add_counter(std::string name, double value) {
    counters.emplace_back(std::move(name), value);
  }
  std::optional<double> counter(std::string_view name) const;
  // Records that part of the search stopped for `reason`; the stats keep the most
  // machine-dependent reason of all parts.
  void stopped(StopReason reason) { stop_reason = std::max(stop_reason, reason); }
};

struct Plan {
  Sequence sequence;
  std::string solver;
  SolveStats stats;
};

}  // namespace remat
