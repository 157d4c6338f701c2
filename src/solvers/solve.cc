#include <fmt/format.h>

#include <cmath>
#include <string>

#include "remat/error.h"
#include "remat/solver.h"

namespace remat {

namespace {

// An over-budget plan worse than the default schedule (higher peak, or the same peak at a higher
// cost) gives way to it: a returned plan is never worse than running the graph as given.
void keep_default_if_better(const Graph& graph, int64_t budget, SolveResult& result) {
  if (result.eval.peak_bytes <= budget) return;
  Sequence fallback = default_schedule(graph);
  Evaluation fallback_eval = simulate(graph, fallback);
  if (!better_plan({fallback_eval.peak_bytes, fallback_eval.cost},
                   {result.eval.peak_bytes, result.eval.cost}, budget))
    return;
  result.plan.sequence = std::move(fallback);
  result.plan.stats.lists.clear();  // they described the plan given up
  result.plan.stats.add_counter("replaced_by_default_schedule", 1);
  result.eval = std::move(fallback_eval);
}

}  // namespace

SolveResult solve(const Graph& graph, std::string_view solver_name, const SolveOptions& options) {
  std::unique_ptr<Solver> solver = make_solver(solver_name);
  return solve(graph, *solver, options);
}

SolveResult solve(const Graph& graph, Solver& solver, const SolveOptions& options) {
  const std::string_view solver_name = solver.name();
  if (options.budget.bytes < 0)
    throw InputError(fmt::format("budget must be >= 0 bytes (got {})", options.budget.bytes));
  if (!(options.time_limit_s > 0))
    throw InputError(fmt::format("time limit must be > 0 seconds (got {})", options.time_limit_s));
  if (options.threads < 1)
    throw InputError(fmt::format("threads must be >= 1 (got {})", options.threads));
  if (!options.start.empty()) {
    if (!solver.accepts_start())
      throw InputError(fmt::format("solver '{}' takes no start sequence", solver.name()));
    const Evaluation start = simulate(graph, options.start);
    if (!start.valid)
      throw InputError(
          fmt::format("start sequence for '{}' is invalid: {}", solver.name(), start.error));
  }

  SolveResult result;
  const int64_t lower_bound = memory_lower_bound(graph);
  if (options.budget.bytes < lower_bound) {
    result.plan.sequence = default_schedule(graph);
    result.plan.solver = std::string(solver.name());
    result.plan.stats.status = SolveStatus::kInfeasible;
    result.plan.stats.min_feasible_budget = lower_bound;
  } else {
    const Deadline clock(options.time_limit_s);
    result.plan = solver.solve(graph, options);
    result.plan.solver = std::string(solver.name());
    result.plan.stats.wall_time_s = clock.elapsed_s();
  }
  result.eval = simulate(graph, result.plan.sequence);
  REMAT_CHECK(result.eval.valid, fmt::format("solver '{}' returned an invalid sequence: {}",
                                             solver_name, result.eval.error));
  SolveStatus& status = result.plan.stats.status;
  if (status != SolveStatus::kInfeasible) {
    keep_default_if_better(graph, options.budget.bytes, result);
    const bool fits = result.eval.peak_bytes <= options.budget.bytes;
    if (!fits) status = SolveStatus::kOverBudget;
    if (fits && status == SolveStatus::kOverBudget) status = SolveStatus::kFeasible;
  }
  return result;
}

}  // namespace remat
