// remat compare GRAPH --budgets 90%,50% --solvers none,fastsa: every solver at every budget, one
// table of the simulator's figures.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common.h"
#include "problem.h"
#include "remat/error.h"
#include "remat/io.h"

namespace remat::cli {
namespace {

struct CompareArgs {
  std::string path;
  std::vector<std::string> budgets = {"90%", "80%", "70%"};
  std::vector<std::string> solvers = {"auto"};
  bool json = false;
  SolverArgs solver_args;
};

struct Row {
  std::string solver;
  std::string budget_text;
  Budget budget;
  Outcome result;
  std::string error;  // the solver rejected this problem (e.g. rotor without chain structure)
};

void run_compare(const CompareArgs& args) {
  const Problem problem = read_problem(args.path);
  const Baseline base{problem.baseline_peak, problem.baseline_cost};
  for (const std::string& name : args.solvers) (void)solver_entry(name);  // fail before solving
  std::vector<Budget> budgets;
  for (const std::string& text : args.budgets)
    budgets.push_back(parse_budget(text, base.peak_bytes));

  std::vector<Row> rows;
  for (const std::string& solver : args.solvers)
    for (size_t b = 0; b < budgets.size(); ++b) {
      SolveOptions options = make_solve_options(args.solver_args, budgets[b], solver);
      ProgressBar bar(fmt::format("{} @ {}", solver, args.budgets[b]));
      options.on_progress = bar.callback();
      Row row{solver, args.budgets[b], budgets[b], {}, {}};
      // A solver that cannot take this problem (its kind, or a graph without chain structure)
      // marks its row; the others still run.
      if (const auto why = refusal(problem, solver)) {
        row.error = *why;
      } else {
        try {
          row.result = solve_problem(problem, solver, options);
        } catch (const UnsupportedGraph& e) {
          row.error = e.what();
        }
      }
      rows.push_back(std::move(row));
    }

  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows) {
      if (!r.error.empty()) {
        out.push_back({{"solver", r.solver},
                       {"budget", r.budget_text},
                       {"budget_bytes", r.budget.bytes},
                       {"status", "error"},
                       {"error", r.error}});
        continue;
      }
      out.push_back({{"solver", r.solver},
                     {"budget", r.budget_text},
                     {"budget_bytes", r.budget.bytes},
                     {"status", to_string(r.result.stats.status)},
                     {"feasible", r.result.peak_bytes <= r.budget.bytes &&
                                      r.result.stats.status != SolveStatus::kInfeasible},
                     {"peak_bytes", r.result.peak_bytes},
                     {"peak_percent_of_baseline", percent(static_cast<double>(r.result.peak_bytes),
                                                          static_cast<double>(base.peak_bytes))},
                     {"cost", r.result.cost},
                     {"cost_increase_percent", percent(r.result.cost - base.cost, base.cost)},
                     {"solve_time_s", r.result.stats.wall_time_s}});
    }
    emit(out.dump(2) + "\n", "");
    return;
  }
  Table table({"solver", "budget", "budget bytes", "status", "peak %", "CI %", "time s"});
  std::vector<std::string> errors;
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      table.add({r.solver, r.budget_text, std::to_string(r.budget.bytes), "error", "-", "-", "-"});
      if (errors.empty() || errors.back() != fmt::format("{}: {}", r.solver, r.error))
        errors.push_back(fmt::format("{}: {}", r.solver, r.error));
      continue;
    }
    const bool infeasible = r.result.stats.status == SolveStatus::kInfeasible;
    table.add(
        {r.solver, r.budget_text, std::to_string(r.budget.bytes),
         std::string(to_string(r.result.stats.status)),
         infeasible ? "-"
                    : fmt::format("{:.1f}", percent(static_cast<double>(r.result.peak_bytes),
                                                    static_cast<double>(base.peak_bytes))),
         infeasible ? "-" : fmt::format("{:.2f}", percent(r.result.cost - base.cost, base.cost)),
         fmt::format("{:.3f}", r.result.stats.wall_time_s)});
  }
  std::string out =
      problem.graph()
          ? fmt::format(
                "graph {}: baseline peak {} bytes, cost {:.10g}, memory lower bound {:.1f}%\n\n",
                problem.display_name(), base.peak_bytes, base.cost,
                percent(static_cast<double>(memory_lower_bound(*problem.graph())),
                        static_cast<double>(base.peak_bytes)))
          : fmt::format("chain {} (L = {}): store-all peak {} bytes, makespan {:.10g}\n\n",
                        problem.display_name(), problem.chain()->length(), base.peak_bytes,
                        base.cost);
  out += table.str();
  for (const std::string& e : errors) out += fmt::format("\nerror: {}", e);
  if (!errors.empty()) out += "\n";
  emit(out, "");
}

}  // namespace

void register_compare(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand("compare", "every solver at every budget, one table");
  cmd->add_option("FILE", args->path, "graph or chain file")->required();
  cmd->add_option("--budgets", args->budgets, "comma-separated budgets ('90%,50%', bytes, '1GB')")
      ->delimiter(',')
      ->default_str("90%,80%,70%");
  cmd->add_option("--solvers", args->solvers, "comma-separated solver names")
      ->delimiter(',')
      ->default_str("auto");
  cmd->add_flag("--json", args->json, "print JSON");
  add_solver_options(*cmd, args->solver_args);
  cmd->callback([args] { run_compare(*args); });
}

}  // namespace remat::cli
