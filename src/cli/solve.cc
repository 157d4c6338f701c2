// remat solve GRAPH --budget 50% --solver S: one plan, judged by the simulator.
#include <fmt/format.h>

#include "chain_commands.h"
#include "common.h"
#include "remat/error.h"
#include "remat/io.h"

namespace remat::cli {
namespace {

struct SolveArgs {
  std::string path;
  std::string budget = "100%";
  std::string solver = "auto";
  std::string output;
  bool json = false;
  SolverArgs solver_args;
};

std::string summary(const Graph& g, const SolveResult& r, Budget budget) {
  const Baseline base = baseline(g);
  const auto steps = static_cast<int64_t>(r.plan.sequence.size());
  const auto peak_pct =
      percent(static_cast<double>(r.eval.peak_bytes), static_cast<double>(base.peak_bytes));
  std::string out = fmt::format("solver    {}\n", r.plan.solver);
  out += fmt::format("status    {}\n", to_string(r.plan.stats.status));
  out +=
      fmt::format("budget    {} bytes ({:.1f}% of baseline)\n", budget.bytes,
                  percent(static_cast<double>(budget.bytes), static_cast<double>(base.peak_bytes)));
  out += fmt::format("peak      {} bytes ({:.1f}% of baseline)\n", r.eval.peak_bytes, peak_pct);
  out += fmt::format("cost      {:.10g} (CI {:+.2f}%)\n", r.eval.cost,
                     percent(r.eval.cost - base.cost, base.cost));
  out += fmt::format("steps     {} ({} recomputations)\n", steps, steps - g.num_nodes());
  out += fmt::format("time      {:.3f} s\n", r.plan.stats.wall_time_s);
  return out;
}

void run_solve(const SolveArgs& args) {
  if (is_chain_file(args.path))
    return run_chain_solve(args.path, args.budget, args.solver, args.output, args.json,
                           args.solver_args);
  const Graph g = read_graph_file(args.path);
  // "min" asks for the least-memory plan: the memory lower bound as the budget.
  const Budget budget = args.budget == "min" ? Budget{memory_lower_bound(g)}
                                             : parse_budget(args.budget, baseline(g).peak_bytes);
  SolveOptions options = make_solve_options(args.solver_args, budget, args.solver);
  ProgressBar bar(args.solver);
  options.on_progress = bar.callback();
  const SolveResult result = solve(g, args.solver, options);
  if (result.plan.stats.status == SolveStatus::kInfeasible)
    throw InputError(fmt::format(
        "budget {} bytes is below the memory lower bound {} bytes of {}: no plan can fit",
        budget.bytes, memory_lower_bound(g), args.path));
  const std::string plan_json = plan_to_json(g, result, budget);
  if (!args.output.empty()) emit(plan_json, args.output);
  emit(args.json ? plan_json : summary(g, result, budget), "");
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
  cmd->add_option("--output,-o", args->output, "write the plan JSON here");
  cmd->add_flag("--json", args->json, "print the plan JSON instead of a summary");
  add_solver_options(*cmd, args->solver_args);
  std::string solvers;
  for (const SolverEntry& e : solver_registry())
    solvers += fmt::format("\n  {:<10} {}\n{}", e.name, e.description,
                           params_help(e.make()->params(), "      --param "));
  cmd->footer("Solvers:" + solvers + chain_solver_help());
  cmd->callback([args] { run_solve(*args); });
}

}  // namespace remat::cli
