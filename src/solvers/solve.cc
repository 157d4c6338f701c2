#include <fmt/format.h>

#include <cmath>
#include <string>

#include "remat/error.h"
#include "remat/solver.h"

namespace remat {

SolveResult solve(const Graph& graph, std::string_view solver_name, const SolveOptions& options) {
  std::unique_ptr<Solver> solver = make_solver(solver_name);
  if (options.budget.bytes < 0)
    throw InputError(fmt::format("budget must be >= 0 bytes (got {})", options.budget.bytes));
  if (!(options.time_limit_s > 0))
    throw InputError(fmt::format("time limit must be > 0 seconds (got {})", options.time_limit_s));
  if (options.threads < 1 || options.threads > kMaxThreads)
    throw InputError(
        fmt::format("threads must be in [1, {}] (got {})", kMaxThreads, options.threads));
  if (!options.start.empty()) {
    if (!solver->accepts_start())
      throw InputError(fmt::format("solver '{}' takes no start sequence", solver->name()));
    const Evaluation start = simulate(graph, options.start);
    if (!start.valid)
      throw InputError(
          fmt::format("start sequence for '{}' is invalid: {}", solver->name(), start.error));
  }

  SolveResult result;
  const int64_t lower_bound = memory_lower_bound(graph);
  if (options.budget.bytes < lower_bound) {
    result.plan.sequence = default_schedule(graph);
    result.plan.solver = std::string(solver->name());
    result.plan.stats.status = SolveStatus::kInfeasible;
    result.plan.stats.min_feasible_budget = lower_bound;
  } else {
    const Deadline clock(options.time_limit_s);
    result.plan = solver->solve(graph, options);
    result.plan.solver = std::string(solver->name());
    result.plan.stats.wall_time_s = clock.elapsed_s();
  }
  result.eval = simulate(graph, result.plan.sequence);
  REMAT_CHECK(result.eval.valid, fmt::format("solver '{}' returned an invalid sequence: {}",
                                             solver_name, result.eval.error));
  SolveStatus& status = result.plan.stats.status;
  if (status != SolveStatus::kInfeasible) {
    const bool fits = result.eval.peak_bytes <= options.budget.bytes;
    if (!fits) status = SolveStatus::kOverBudget;
    if (fits && status == SolveStatus::kOverBudget) status = SolveStatus::kFeasible;
  }
  return result;
}

Deadline::Deadline(double seconds) : start_(std::chrono::steady_clock::now()) {
  const double capped = std::min(seconds, 1e9);
  end_ = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(capped));
}

double Deadline::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

uint64_t derive_seed(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace remat
