// remat sweep GRAPH --solver S --points N [--plot curve.svg]: the time–space trade-off curve of
// one solver, from the memory lower bound (on a chain: the solver's least peak) to the baseline
// peak (store-all on a chain).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "common.h"
#include "problem.h"
#include "remat/error.h"
#include "remat/io.h"

namespace remat::cli {
namespace {

struct SweepArgs {
  std::string path;
  std::string solver = "none";
  int points = 10;
  std::string plot;
  bool json = false;
  SolverArgs solver_args;
};

struct CurvePoint {
  Budget budget;
  Outcome result;
  double budget_pct = 0;
  double peak_pct = 0;
  double ci_pct = 0;
};

// Evenly spaced budgets from the memory lower bound to the baseline peak, both included.
std::vector<Budget> sweep_budgets(int64_t lower_bound, int64_t baseline_peak, int points) {
  std::vector<Budget> budgets;
  for (int i = 0; i < points; ++i) {
    const double t = points == 1 ? 1.0 : static_cast<double>(i) / (points - 1);
    budgets.push_back({lower_bound + static_cast<int64_t>(std::llround(
                                         t * static_cast<double>(baseline_peak - lower_bound)))});
  }
  return budgets;
}

// A line plot of CI % (y) against peak % of baseline (x); points over budget are hollow.
std::string curve_svg(const std::vector<CurvePoint>& curve, std::string_view title) {
  constexpr double kWidth = 640, kHeight = 420, kLeft = 70, kRight = 20, kTop = 40, kBottom = 50;
  double x_min = 100, y_max = 0;
  for (const CurvePoint& p : curve) {
    x_min = std::min(x_min, p.peak_pct);
    y_max = std::max(y_max, p.ci_pct);
  }
  x_min = std::floor(std::max(0.0, x_min - 5) / 10) * 10;
  y_max = y_max <= 0 ? 1 : y_max * 1.1;
  auto sx = [&](double x) {
    return kLeft + (x - x_min) / (100 - x_min) * (kWidth - kLeft - kRight);
  };
  auto sy = [&](double y) { return kHeight - kBottom - y / y_max * (kHeight - kTop - kBottom); };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"24\" font-size=\"14\">{}</text>\n",
      kWidth, kHeight, kLeft, xml_escape(shorten(title, 200)));
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n",
                     kLeft, kHeight - kBottom, kWidth - kRight);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n",
                     kLeft, kHeight - kBottom, kTop);
  for (int i = 0; i <= 5; ++i) {
    const double x = x_min + (100 - x_min) * i / 5, y = y_max * i / 5;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.0f}</text>\n", sx(x),
                       kHeight - kBottom + 18, x);
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.2g}</text>\n", kLeft - 6,
                       sy(y) + 4, y);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">peak, % of baseline</text>\n",
                     (kLeft + kWidth - kRight) / 2, kHeight - 10);
  svg += fmt::format(
      "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">cost "
      "increase, %</text>\n",
      (kTop + kHeight - kBottom) / 2, (kTop + kHeight - kBottom) / 2);
  std::string points;
  for (const CurvePoint& p : curve)
    points += fmt::format("{:.1f},{:.1f} ", sx(p.peak_pct), sy(p.ci_pct));
  svg += fmt::format(
      "<polyline points=\"{}\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n", points);
  for (const CurvePoint& p : curve) {
    const bool fits = p.result.peak_bytes <= p.budget.bytes;
    svg += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\" stroke=\"#1f77b4\"/>\n",
        sx(p.peak_pct), sy(p.ci_pct), fits ? "#1f77b4" : "white");
  }
  return svg + "</svg>\n";
}

void run_sweep(const SweepArgs& args) {
  if (!args.plot.empty()) refuse_overwriting_input(args.plot, args.path, "the plot");
  const Problem problem = read_problem(args.path);
  if (const auto why = refusal(problem, args.solver)) throw InputError(*why);
  check_param_scopes(args.solver_args.params, std::span(&args.solver, 1));
  const Baseline base{problem.baseline_peak, problem.baseline_cost};
  // The low end: a graph's memory lower bound; on a chain, the least peak the solver reaches
  // (its plan at budget 0).
  const int64_t lower_bound =
      problem.graph() ? memory_lower_bound(*problem.graph())
                      : solve_problem(problem, args.solver,
                                      make_solve_options(args.solver_args, Budget{0}, args.solver))
                            .peak_bytes;
  std::vector<CurvePoint> curve;
  for (Budget budget : sweep_budgets(lower_bound, base.peak_bytes, args.points)) {
    SolveOptions options = make_solve_options(args.solver_args, budget, args.solver);
    ProgressBar bar(fmt::format("{} @ {} bytes", args.solver, budget.bytes));
    options.on_progress = bar.callback();
    CurvePoint p{budget, solve_problem(problem, args.solver, options)};
    const auto baseline_peak = static_cast<double>(base.peak_bytes);
    p.budget_pct = percent(static_cast<double>(budget.bytes), baseline_peak);
    p.peak_pct = percent(static_cast<double>(p.result.peak_bytes), baseline_peak);
    p.ci_pct = percent(p.result.cost - base.cost, base.cost);
    curve.push_back(std::move(p));
  }
  if (!args.plot.empty())
    emit(curve_svg(curve, fmt::format("{}: {}", problem.display_name(), args.solver)), args.plot);
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const CurvePoint& p : curve)
      out.push_back({{"budget_bytes", p.budget.bytes},
                     {"budget_percent_of_baseline", p.budget_pct},
                     {"status", to_string(p.result.stats.status)},
                     {"peak_bytes", p.result.peak_bytes},
                     {"peak_percent_of_baseline", p.peak_pct},
                     {"cost_increase_percent", p.ci_pct},
                     {"solve_time_s", p.result.stats.wall_time_s}});
    emit(out.dump(2) + "\n", "");
    return;
  }
  Table table({"budget %", "budget bytes", "status", "peak %", "CI %", "time s"});
  for (const CurvePoint& p : curve)
    table.add({fmt::format("{:.1f}", p.budget_pct), std::to_string(p.budget.bytes),
               std::string(to_string(p.result.stats.status)), fmt::format("{:.1f}", p.peak_pct),
               fmt::format("{:.2f}", p.ci_pct), fmt::format("{:.3f}", p.result.stats.wall_time_s)});
  emit(table.str(), "");
}

}  // namespace

void register_sweep(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "time-space curve of one solver, from the memory lower bound to the baseline peak");
  cmd->add_option("FILE", args->path, "graph or chain file")->required();
  cmd->add_option("--solver,-s", args->solver, "solver name")->default_val("none");
  cmd->add_option("--points", args->points, "number of budgets")
      ->default_val(10)
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--plot", args->plot, "write the curve as an SVG file")
      ->check(output_path_validator());
  cmd->add_flag("--json", args->json, "print JSON");
  add_solver_options(*cmd, args->solver_args);
  cmd->callback([args] { run_sweep(*args); });
}

}  // namespace remat::cli
