// The judged solve (registry.h): one status policy for graphs and chains.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <new>
#include <optional>
#include <string>
#include <type_traits>

#include "remat/error.h"
#include "remat/interrupt.h"
#include "remat/registry.h"
#include "remat/toolkit.h"

namespace remat {

namespace {

void check_options(const SolverEntry& solver, const SolveOptions& options) {
  if (options.budget.bytes < 0)
    throw InputError(fmt::format("budget must be >= 0 bytes (got {})", options.budget.bytes));
  check_work_limit(options.work_limit);
  check_time_limit(options.time_limit_s);
  if (options.threads < 1 || options.threads > kMaxThreads)
    throw InputError(
        fmt::format("threads must be in [1, {}] (got {})", kMaxThreads, options.threads));
  if (!options.start.empty() && !solver.accepts_start)
    throw InputError(fmt::format("solver '{}' takes no start sequence", solver.name));
}

// The names of the rows that accept the kind, for the error of a row that does not.
std::string rows_accepting(bool chain) {
  std::vector<std::string_view> names;
  for (const SolverEntry& e : solver_registry())
    if (chain ? e.accepts.chain : e.accepts.graph) names.push_back(e.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// A problem the row does not accept is an error of that row only (compare marks it and goes on).
template <class Problem>
void check_accepts(const SolverEntry& row, const Problem& problem) {
  constexpr bool chain = std::is_same_v<Problem, Chain>;
  if (const std::optional<std::string> why = not_applicable(row, problem))
    throw UnsupportedGraph((chain ? row.accepts.chain : row.accepts.graph)
                               ? *why
                               : fmt::format("{} ({} solvers: {})", *why, chain ? "chain" : "graph",
                                             rows_accepting(chain)));
}

// A search the clock stopped because the user interrupted it says so.
void note_interrupt(SolveStats& stats) {
  if (stats.stop_reason == StopReason::kTimeLimit && interrupt_requested())
    stats.stopped(StopReason::kInterrupted);
}

// The time limit holds from the first instruction of the judged solve: the solver gets what is
// left of it once the judge's checks ran, less what judging its plan will take (`judging_s`).
SolveOptions solver_options(const SolveOptions& options, const Deadline& clock, double judging_s) {
  SolveOptions o = options;
  o.time_limit_s = std::max(1e-3, options.time_limit_s - clock.elapsed_s() - judging_s);
  return o;
}

// A plan over budget because the clock or the user stopped the search, not its work limit, says
// so: the same solve with more time (or on an idle machine) may fit.
void note_cut_short(SolveStats& stats, bool fits, double time_limit_s) {
  if (fits || stats.stop_reason < StopReason::kTimeLimit) return;
  const std::string why =
      stats.stop_reason == StopReason::kInterrupted
          ? std::string("interrupted before its work limit: the plan is the best found so far")
          : fmt::format(
                "the time limit ({:g} s) stopped the search before its work limit: a longer time "
                "limit, or a less loaded machine, may find a plan within budget",
                time_limit_s);
  for (auto& [name, lines] : stats.lists)
    if (name == "notes") {
      lines.push_back(why);
      return;
    }
  stats.lists.emplace_back("notes", std::vector<std::string>{why});
}

// The status policy, the same for both kinds. A plan the better-plan rule ranks below the default
// schedule gives way to it: an over-budget plan with a higher peak than the default, or any plan
// costlier than a default that fits (for solvers that minimise cost; a fixed scheme within budget
// stands, see Solver::minimises_cost). Then the status follows the simulator's peak.
// `fallback` is the default schedule's score; `make_default` its plan and evaluation, made only
// when it replaces the solver's (on a large graph a simulation is a good part of a short limit).
template <class Result, class MakeDefault>
void judge(Result& result, int64_t budget, bool minimises_cost, PlanScore fallback,
           MakeDefault make_default, double time_limit_s) {
  SolveStatus& status = result.plan.stats.status;
  if (status == SolveStatus::kInfeasible) {
    REMAT_CHECK(result.eval.peak_bytes > budget, "a plan within budget was called infeasible");
    return;
  }
  // A fixed scheme within budget stands: it is the plan asked for.
  const bool fixed_scheme_fits = !minimises_cost && result.eval.peak_bytes <= budget;
  if (!fixed_scheme_fits &&
      better_plan(fallback, {result.eval.peak_bytes, result.eval.cost}, budget)) {
    auto [sequence, eval] = make_default();
    result.plan.sequence = std::move(sequence);
    result.plan.stats.lists.clear();  // they described the plan given up
    result.plan.stats.add_counter("replaced_by_default_schedule", 1);
    result.eval = std::move(eval);
  }
  const bool fits = result.eval.peak_bytes <= budget;
  if (!fits) status = SolveStatus::kOverBudget;
  if (fits && status == SolveStatus::kOverBudget) status = SolveStatus::kFeasible;
  note_cut_short(result.plan.stats, fits, time_limit_s);
}

// A solver's failure that is not about the input (a failed internal check, a back end's own
// exception) is a bug: an InternalError naming the solver and the problem, never an exception
// the caller cannot place (or one that ends the process on its way out).
template <class Run>
auto run_solver(std::string_view solver, std::string_view problem, Run run) {
  const auto bug = [&](std::string_view what) {
    return InternalError(fmt::format("solver '{}' on {}: {}", solver, problem, what));
  };
  try {
    return run();
  } catch (const InputError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw bug(e.what());
  } catch (...) {
    throw bug("an exception of unknown type");
  }
}

std::string describe(std::string_view kind, const std::string& name) {
  return name.empty() ? fmt::format("an unnamed {}", kind)
                      : fmt::format("{} '{}'", kind, shorten(name));
}

}  // namespace

SolveResult solve(const Graph& graph, std::string_view solver, const SolveOptions& options) {
  return solve(graph, solver_entry(solver), options);
}

SolveResult solve(const Graph& graph, const SolverEntry& row, const SolveOptions& options) {
  const Deadline clock(options.time_limit_s);
  check_options(row, options);
  check_accepts(row, graph);
  const std::string problem = describe("graph", graph.name());
  // Nothing to compute: refused like a file without outputs (io.h, require_outputs).
  const auto outputs = graph.graph_outputs();
  if (std::none_of(outputs.begin(), outputs.end(),
                   [&](ValueId v) { return graph.producer(v).valid(); }))
    throw InputError(
        fmt::format("{} has no outputs that a node produces: nothing to plan", problem));
  if (!options.start.empty()) {
    const Evaluation start = simulate(graph, options.start);
    if (!start.valid)
      throw InputError(
          fmt::format("start sequence for '{}' is invalid: {}", row.name, start.error));
  }
  SolveResult result;
  const int64_t lower_bound = memory_lower_bound(graph);
  if (options.budget.bytes < lower_bound) {
    result.plan.sequence = default_schedule(graph);
    result.plan.stats.status = SolveStatus::kInfeasible;
    result.plan.stats.min_feasible_budget = lower_bound;
  } else {
    // Judging the plan: its simulation, a little longer than the default schedule's.
    const SolveOptions o = solver_options(options, clock, 1.5 * graph.bounds().simulation_seconds);
    result.plan = run_solver(row.name, problem,
                             [&] { return row.make(registry_directory())->solve(graph, o); });
    note_interrupt(result.plan.stats);
  }
  result.plan.solver = std::string(row.name);
  result.eval = simulate(graph, result.plan.sequence);
  REMAT_CHECK(result.eval.valid, fmt::format("solver '{}' returned an invalid sequence for {}: {}",
                                             row.name, problem, result.eval.error));
  const Baseline base = baseline(graph);
  judge(
      result, options.budget.bytes, row.minimises_cost, {base.peak_bytes, base.cost},
      [&] {
        Sequence fallback = default_schedule(graph);
        Evaluation eval = simulate(graph, fallback);
        return std::pair{std::move(fallback), std::move(eval)};
      },
      options.time_limit_s);
  result.plan.stats.wall_time_s = clock.elapsed_s();
  return result;
}

ChainSolveResult solve(const Chain& chain, std::string_view solver, const SolveOptions& options) {
  return solve(chain, solver_entry(solver), options);
}

ChainSolveResult solve(const Chain& chain, const SolverEntry& row, const SolveOptions& options) {
  const Deadline clock(options.time_limit_s);
  check_options(row, options);
  check_accepts(row, chain);
  if (!options.start.empty())
    throw InputError(fmt::format(
        "solver '{}': a start sequence is a graph sequence; chains take none", row.name));
  validate_chain(chain, chain.name.empty() ? "chain" : chain.name);
  ChainSolveResult result;
  ChainSequence store_all = store_all_sequence(chain);
  ChainEvaluation store_all_eval = simulate_chain(chain, store_all);
  // A chain's simulation is as quick as its short sequence: nothing to keep for judging.
  const SolveOptions o = solver_options(options, clock, 0);
  result.plan = run_solver(row.name, describe("chain", chain.name),
                           [&] { return row.make(registry_directory())->solve_chain(chain, o); });
  note_interrupt(result.plan.stats);
  result.plan.solver = std::string(row.name);
  result.eval = simulate_chain(chain, result.plan.sequence);
  REMAT_CHECK(result.eval.valid, fmt::format("chain solver '{}' returned an invalid sequence: {}",
                                             row.name, result.eval.error));
  judge(
      result, options.budget.bytes, row.minimises_cost,
      {store_all_eval.peak_bytes, store_all_eval.cost},
      [&] {
        return std::pair{std::move(store_all), std::move(store_all_eval)};
      },
      options.time_limit_s);
  result.plan.stats.wall_time_s = clock.elapsed_s();
  return result;
}

}  // namespace remat
