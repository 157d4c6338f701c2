// remat compare GRAPH --budgets 90%,50% --solvers none,fastsa: every solver at every budget, one
// table of the simulator's figures.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "common.h"
#include "problem.h"
#include "remat/error.h"
#include "remat/io.h"

namespace remat::cli {
namespace {

// The status of a row whose solver does not apply to the problem.
constexpr std::string_view kNotApplicable = "not-applicable";

struct CompareArgs {
  std::string path;
  std::vector<std::string> budgets = {"90%", "80%", "70%"};
  std::vector<std::string> solvers = {"auto"};
  bool json = false;
  std::string bound;  // "checkmate": the LP relaxation's bound per budget
  SolverArgs solver_args;
};

struct Row {
  std::string solver;
  std::string budget_text;
  Budget budget;
  Outcome result;
  // Why the solver does not apply to this problem (its row's Accepts, or a graph without the
  // chain structure it needs); empty when it ran.
  std::string not_applicable;
  std::optional<double> lp_bound;  // --bound checkmate: the LP bound at this budget
};

// The fixed-order LP bound at `budget` (checkmate-lp with bound_only), or nullopt when the LP
// found none in the time limit; InputError when the problem is not a graph or CBC is not built.
std::optional<double> lp_bound(const Problem& problem, const CompareArgs& args, Budget budget) {
  if (args.bound != "checkmate")
    throw InputError(
        fmt::format("--bound: unknown bound '{}' (known: checkmate, the LP relaxation of "
                    "Checkmate's MILP)",
                    args.bound));
  if (problem.graph() == nullptr)
    throw InputError("--bound checkmate: the LP bound needs a graph, not a chain");
  SolverArgs solver_args = args.solver_args;
  solver_args.params = {"bound_only=true"};
  const SolveOptions options = make_solve_options(solver_args, budget, "checkmate-lp");
  return solve_problem(problem, "checkmate-lp", options).stats.cost_lower_bound;
}

// The solver's "notes" list: what it could not do, or why its plan is not what it looks like.
std::vector<std::string> notes_of(const Outcome& result) {
  std::vector<std::string> notes;
  for (const auto& [name, lines] : result.stats.lists)
    if (name == "notes") notes.insert(notes.end(), lines.begin(), lines.end());
  return notes;
}

// Every solver at every budget; a solver that does not apply marks its rows.
std::vector<Row> solve_rows(const Problem& problem, const CompareArgs& args,
                            const std::vector<Budget>& budgets,
                            const std::vector<std::optional<double>>& lp_bounds) {
  std::vector<Row> rows;
  for (const std::string& solver : args.solvers)
    for (size_t b = 0; b < budgets.size(); ++b) {
      SolveOptions options = make_solve_options(args.solver_args, budgets[b], solver);
      ProgressBar bar(fmt::format("{} @ {}", solver, args.budgets[b]));
      options.on_progress = bar.callback();
      Row row{solver, args.budgets[b], budgets[b], {}, {}, lp_bounds[b]};
      // A solver that cannot take this problem (its row's Accepts, checked first, or a graph
      // without the chain structure it needs) marks its row; the others still run.
      if (const auto why = refusal(problem, solver)) {
        row.not_applicable = *why;
      } else {
        try {
          row.result = solve_problem(problem, solver, options);
        } catch (const UnsupportedGraph& e) {
          row.not_applicable = e.what();
        }
      }
      rows.push_back(std::move(row));
    }
  return rows;
}

nlohmann::json json_rows(const std::vector<Row>& rows, const Baseline& base) {
  nlohmann::json out = nlohmann::json::array();
  for (const Row& r : rows) {
    if (!r.not_applicable.empty()) {
      out.push_back({{"solver", r.solver},
                     {"budget", r.budget_text},
                     {"budget_bytes", r.budget.bytes},
                     {"status", kNotApplicable},
                     {"reason", r.not_applicable}});
      continue;
    }
    nlohmann::json row = {
        {"solver", r.solver},
        {"budget", r.budget_text},
        {"budget_bytes", r.budget.bytes},
        {"status", to_string(r.result.stats.status)},
        {"feasible", r.result.peak_bytes <= r.budget.bytes &&
                         r.result.stats.status != SolveStatus::kInfeasible},
        {"peak_bytes", r.result.peak_bytes},
        {"peak_percent_of_baseline",
         percent(static_cast<double>(r.result.peak_bytes), static_cast<double>(base.peak_bytes))},
        {"cost", r.result.cost},
        {"cost_increase_percent", percent(r.result.cost - base.cost, base.cost)},
        {"solve_time_s", r.result.stats.wall_time_s},
        {"stop_reason", to_string(r.result.stats.stop_reason)}};
    if (const std::optional<double> bound = r.result.stats.cost_lower_bound) {
      row["cost_lower_bound"] = *bound;
      row["gap_percent"] = gap_percent(r.result.cost, *bound);
    }
    if (r.lp_bound) {
      row["lp_bound"] = *r.lp_bound;
      row["gap_to_lp_bound_percent"] = gap_percent(r.result.cost, *r.lp_bound);
    }
    if (const std::vector<std::string> notes = notes_of(r.result); !notes.empty())
      row["notes"] = notes;
    out.push_back(std::move(row));
  }
  return out;
}

// The table of every row; the reasons for not-applicable rows and the solvers' notes, each once,
// are printed under it.
struct TableReport {
  Table table;
  std::vector<std::string> reasons, notes;
};

TableReport table_rows(const std::vector<Row>& rows, const Baseline& base, bool with_lp) {
  std::vector<std::string> header = {"solver", "budget", "budget bytes", "status",
                                     "peak %", "CI %",   "bound CI %",   "gap %"};
  if (with_lp) header.push_back("gap to LP bound %");
  header.push_back("time s");
  TableReport report{Table(header), {}, {}};
  Table& table = report.table;
  std::vector<std::string>& reasons = report.reasons;
  std::vector<std::string>& notes = report.notes;
  for (const Row& r : rows) {
    if (!r.not_applicable.empty()) {
      std::vector<std::string> cells = {r.solver,
                                        r.budget_text,
                                        std::to_string(r.budget.bytes),
                                        std::string(kNotApplicable),
                                        "-",
                                        "-",
                                        "-",
                                        "-"};
      if (with_lp) cells.push_back("-");
      cells.push_back("-");
      table.add(cells);
      const std::string reason = fmt::format("{}: {}", r.solver, r.not_applicable);
      if (reasons.empty() || reasons.back() != reason) reasons.push_back(reason);
      continue;
    }
    const bool infeasible = r.result.stats.status == SolveStatus::kInfeasible;
    const std::optional<double> bound = r.result.stats.cost_lower_bound;
    // A note (e.g. why rotor found one block) marks the row and is printed under the table.
    const std::vector<std::string> row_notes = notes_of(r.result);
    for (const std::string& n : row_notes)
      if (std::find(notes.begin(), notes.end(), fmt::format("{}: {}", r.solver, n)) == notes.end())
        notes.push_back(fmt::format("{}: {}", r.solver, n));
    std::vector<std::string> cells = {
        r.solver,
        r.budget_text,
        std::to_string(r.budget.bytes),
        std::string(to_string(r.result.stats.status)) + (row_notes.empty() ? "" : " *"),
        infeasible ? "-"
                   : fmt::format("{:.1f}", percent(static_cast<double>(r.result.peak_bytes),
                                                   static_cast<double>(base.peak_bytes))),
        infeasible ? "-" : fmt::format("{:.2f}", percent(r.result.cost - base.cost, base.cost)),
        bound ? fmt::format("{:.2f}", percent(*bound - base.cost, base.cost)) : "-",
        bound && !infeasible ? fmt::format("{:.2f}", gap_percent(r.result.cost, *bound)) : "-"};
    if (with_lp)
      cells.push_back(r.lp_bound && !infeasible
                          ? fmt::format("{:.2f}", gap_percent(r.result.cost, *r.lp_bound))
                          : "-");
    cells.push_back(fmt::format("{:.3f}", r.result.stats.wall_time_s));
    table.add(cells);
  }
  return report;
}

// What the text report says above its table: the baseline and, with --bound, the LP bounds.
std::string text_heading(const Problem& problem, const CompareArgs& args, const Baseline& base,
                         const std::vector<std::optional<double>>& lp_bounds) {
  const bool with_lp = !args.bound.empty();
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
  for (size_t b = 0; with_lp && b < lp_bounds.size(); ++b)
    out += lp_bounds[b]
               ? fmt::format(
                     "LP bound at {}: cost {:.10g} (CI {:+.2f}%), over plans in the node "
                     "order (checkmate-lp)\n",
                     args.budgets[b], *lp_bounds[b], percent(*lp_bounds[b] - base.cost, base.cost))
               : fmt::format(
                     "LP bound at {}: none (the LP found no solution in the time limit "
                     "or no plan in the node order fits)\n",
                     args.budgets[b]);
  if (with_lp) out += "\n";
  return out;
}

void run_compare(const CompareArgs& args) {
  const Problem problem = read_problem(args.path);
  const Baseline base{problem.baseline_peak, problem.baseline_cost};
  for (const std::string& name : args.solvers) (void)solver_entry(name);  // fail before solving
  check_param_scopes(args.solver_args.params, args.solvers);
  std::vector<Budget> budgets;
  for (const std::string& text : args.budgets)
    budgets.push_back(parse_budget(text, base.peak_bytes));

  std::vector<std::optional<double>> lp_bounds(budgets.size());
  if (!args.bound.empty()) {
    (void)solver_entry("checkmate-lp");  // names the solvers this build has when it has not
    for (size_t b = 0; b < budgets.size(); ++b) lp_bounds[b] = lp_bound(problem, args, budgets[b]);
  }

  const std::vector<Row> rows = solve_rows(problem, args, budgets, lp_bounds);
  if (args.json) {
    emit(json_rows(rows, base).dump(2) + "\n", "");
    return;
  }
  const TableReport report = table_rows(rows, base, !args.bound.empty());
  std::string out = text_heading(problem, args, base, lp_bounds) + report.table.str();
  for (const std::string& reason : report.reasons)
    out += fmt::format("\nnot applicable: {}", reason);
  for (const std::string& n : report.notes) out += fmt::format("\n* note: {}", n);
  if (!report.reasons.empty() || !report.notes.empty()) out += "\n";
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
  cmd->add_option("--bound", args->bound,
                  "'checkmate': solve Checkmate's LP relaxation once per budget and add a 'gap to "
                  "LP bound' column for every solver");
  add_solver_options(*cmd, args->solver_args);
  cmd->callback([args] { run_compare(*args); });
}

}  // namespace remat::cli
