// remat solve GRAPH --budget 50% --solver S: one plan, judged by the simulator.
#include <fmt/format.h>

#include "common.h"
#include "problem.h"
#include "remat/error.h"
#include "remat/io.h"

namespace remat::cli {
namespace {

struct SolveArgs {
  std::string path;
  std::string budget = "100%";
  std::string solver = "auto";
  std::string output;
  std::string start;  // a plan file to start from (SolveOptions::start)
  bool json = false;
  SolverArgs solver_args;
};

// The plan file given with --start, for a graph (its steps checked against the graph); a chain
// takes none.
Sequence read_start(const Problem& problem, const std::string& path) {
  if (problem.graph() == nullptr)
    throw InputError(
        fmt::format("--start: a start plan is a graph plan; {} is a chain", problem.path));
  return read_plan_file(*problem.graph(), path).sequence;
}

std::string summary(const Problem& problem, const Outcome& r, Budget budget) {
  const auto base_peak = static_cast<double>(problem.baseline_peak);
  std::string out = fmt::format("solver    {}\n", r.solver);
  out += fmt::format("status    {}\n", to_string(r.stats.status));
  out += fmt::format("budget    {} bytes ({:.1f}% of baseline)\n", budget.bytes,
                     percent(static_cast<double>(budget.bytes), base_peak));
  out += fmt::format("peak      {} bytes ({:.1f}% of baseline)\n", r.peak_bytes,
                     percent(static_cast<double>(r.peak_bytes), base_peak));
  // Over the budget, how far a plan could go: none peaks below the memory lower bound.
  if (r.stats.status == SolveStatus::kOverBudget && problem.graph() != nullptr) {
    const int64_t floor = memory_lower_bound(*problem.graph());
    out += fmt::format(
        "floor     {} bytes ({:.1f}% of baseline): the memory lower bound; no plan peaks lower, "
        "and budgets above it are not proven out of reach\n",
        floor, percent(static_cast<double>(floor), base_peak));
  }
  out += fmt::format("cost      {:.10g} (CI {:+.2f}%)\n", r.cost,
                     percent(r.cost - problem.baseline_cost, problem.baseline_cost));
  if (r.stats.cost_lower_bound) {
    const double bound = *r.stats.cost_lower_bound;
    out += fmt::format(
        "bound     {:.10g} (CI {:+.2f}%), gap {:.2f}% (proven lower bound on cost)\n", bound,
        percent(bound - problem.baseline_cost, problem.baseline_cost), gap_percent(r.cost, bound));
  }
  out += fmt::format("steps     {} ({} recomputations)\n", r.steps, r.recomputations);
  out += fmt::format("time      {:.3f} s, work {:.3f} units\n", r.stats.wall_time_s, r.stats.work);
  // Only a search that converged or hit a work limit gives this plan on any machine.
  out += fmt::format("stopped   {}\n", to_string(r.stats.stop_reason));
  // A solver's "notes" list says what it could not do (e.g. rockmate without CBC): never hidden.
  for (const auto& [name, lines] : r.stats.lists)
    if (name == "notes")
      for (const std::string& line : lines) out += fmt::format("note      {}\n", line);
  if (!r.sequence_text.empty() && r.steps <= 200)
    out += fmt::format("sequence  {}\n", r.sequence_text);
  return out;
}

void run_solve(const SolveArgs& args) {
  if (!args.output.empty()) refuse_overwriting_input(args.output, args.path, "the plan");
  const Problem problem = read_problem(args.path);
  if (const auto why = refusal(problem, args.solver)) throw InputError(*why);
  check_param_scopes(args.solver_args.params, std::span(&args.solver, 1));
  // "min" asks for the least-memory plan: the memory lower bound of a graph, or on a chain the
  // smallest budget the solver can meet (asked at budget 0).
  Budget budget;
  if (args.budget != "min") {
    budget = parse_budget(args.budget, problem.baseline_peak);
  } else if (const Graph* g = problem.graph()) {
    budget = {memory_lower_bound(*g)};
  } else {
    const Outcome least = solve_problem(
        problem, args.solver, make_solve_options(args.solver_args, Budget{0}, args.solver));
    budget = {least.stats.min_feasible_budget.value_or(least.peak_bytes)};
  }
  SolveOptions options = make_solve_options(args.solver_args, budget, args.solver);
  if (!args.start.empty()) options.start = read_start(problem, args.start);
  ProgressBar bar(args.solver);
  options.on_progress = bar.callback();
  const Outcome result = solve_problem(problem, args.solver, options);
  // Only a proof is an error; an over-budget plan is a result, printed with its status.
  if (result.stats.status == SolveStatus::kInfeasible) {
    const int64_t least = result.stats.min_feasible_budget.value_or(0);
    throw InputError(
        problem.graph()
            ? fmt::format(
                  "budget {} bytes is below the memory lower bound {} bytes of {}: no plan can fit",
                  budget.bytes, least, args.path)
            : fmt::format("budget {} bytes ({}) is below the smallest budget any plan can meet "
                          "on {}: {} bytes ({}), proved by {}",
                          budget.bytes, format_bytes(budget.bytes), args.path, least,
                          format_bytes(least), result.solver));
  }
  // `-o -`: standard output gets the plan JSON alone, so it can be piped into a reader.
  if (!args.output.empty()) emit(result.plan_json, args.output);
  if (args.output.empty() || !is_standard_output(args.output))
    emit(args.json ? result.plan_json : summary(problem, result, budget), "");
}

}  // namespace

void register_solve(CLI::App& app) {
  auto args = std::make_shared<SolveArgs>();
  CLI::App* cmd = app.add_subcommand("solve", "find a plan within a memory budget");
  cmd->add_option("GRAPH", args->path,
                  "graph or chain file (remat-graph, NetworkX or remat-chain JSON)")
      ->required();
  cmd->add_option(
         "--budget,-b", args->budget,
         "memory budget: '50%' of the baseline peak, bytes ('90MB', '1GiB', '123456'), or 'min' "
         "(the memory lower bound: the least-memory plan)")
      ->default_val("100%");
  cmd->add_option("--solver,-s", args->solver, "solver name (listed below)")->default_val("auto");
  cmd->add_option("--output,-o", args->output,
                  "write the plan JSON here ('-': standard output, then without the summary)")
      ->check(output_path_validator());
  std::vector<std::string_view> starters;
  for (const SolverEntry& e : solver_registry())
    if (e.accepts_start) starters.push_back(e.name);
  cmd->add_option("--start", args->start,
                  fmt::format("a plan JSON for the same graph to start the search from (solvers "
                              "that take a start: {})",
                              fmt::join(starters, ", ")));
  cmd->add_flag("--json", args->json, "print the plan JSON instead of a summary");
  add_solver_options(*cmd, args->solver_args);
  std::string solvers;
  for (const SolverEntry& e : solver_registry())
    solvers += fmt::format(
        "\n  {:<10} {}{}\n{}", e.name, e.description,
        !e.accepts.graph  ? " [chain only]"
        : e.accepts.chain ? " [chain]"
                          : "",
        params_help(e.params ? e.params() : std::span<const ParamInfo>{}, "      --param "));
  cmd->footer("Solvers (those marked [chain] also take chain files, [chain only] only them):" +
              solvers);
  cmd->callback([args] { run_solve(*args); });
}

}  // namespace remat::cli
