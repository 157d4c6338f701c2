// plan.h — what a solver returns: a sequence of node executions and statistics about the search.
// A node appearing twice in the sequence is a recomputation. Peak and cost are never stored here:
// they come from simulate() (simulate.h), the one judge of a plan.
#pragma once

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

struct SolveStats {
  SolveStatus status = SolveStatus::kFeasible;
  double wall_time_s = 0;
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
};

struct Plan {
  Sequence sequence;
  std::string solver;
  SolveStats stats;
};

}  // namespace remat
