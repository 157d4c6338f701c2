// remat simulate GRAPH PLAN: validity, peak, cost and (optionally) memory over time.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common.h"
#include "problem.h"
#include "remat/error.h"
#include "remat/io.h"

namespace remat::cli {
namespace {

struct SimulateArgs {
  std::string graph_path;
  std::string plan_path;
  bool timeline = false;
  bool json = false;
};

// The figures both kinds of plan report, and the JSON fields they share.
struct SimulatedFigures {
  int64_t peak_bytes;
  int64_t peak_step;
  double cost;
  size_t steps;
  int64_t baseline_peak_bytes;
  double baseline_cost;
  double peak_percent() const {
    return percent(static_cast<double>(peak_bytes), static_cast<double>(baseline_peak_bytes));
  }
  double cost_increase_percent() const { return percent(cost - baseline_cost, baseline_cost); }
};

nlohmann::json figures_json(const SimulatedFigures& f) {
  return {{"valid", true},
          {"peak_bytes", f.peak_bytes},
          {"peak_step", f.peak_step},
          {"cost", f.cost},
          {"steps", f.steps},
          {"baseline_peak_bytes", f.baseline_peak_bytes},
          {"baseline_cost", f.baseline_cost},
          {"peak_percent_of_baseline", f.peak_percent()},
          {"cost_increase_percent", f.cost_increase_percent()}};
}

void emit_json(nlohmann::json doc, const std::vector<int64_t>* timeline) {
  if (timeline != nullptr) doc["timeline"] = *timeline;
  emit(doc.dump(2) + "\n", "");
}

// A chain plan on a chain: the same figures and field names as for a graph (cost: makespan).
void simulate_chain_plan(const Problem& problem, const SimulateArgs& args) {
  const Chain& chain = *problem.chain();
  const ChainSequence ops = parse_chain_plan_json(read_text_file(args.plan_path), args.plan_path);
  const ChainEvaluation e = simulate_chain(chain, ops);
  if (!e.valid) throw InputError(fmt::format("{}: invalid plan: {}", args.plan_path, e.error));
  const SimulatedFigures f{.peak_bytes = e.peak_bytes,
                           .peak_step = e.peak_step,
                           .cost = e.cost,
                           .steps = ops.size(),
                           .baseline_peak_bytes = problem.baseline_peak,
                           .baseline_cost = problem.baseline_cost};
  const double peak_pct = f.peak_percent(), ci = f.cost_increase_percent();
  if (args.json) {
    nlohmann::json doc = figures_json(f);
    doc["makespan"] = e.cost;
    emit_json(std::move(doc), args.timeline ? &e.timeline : nullptr);
    return;
  }
  std::string out = "valid     yes\n";
  out += fmt::format("steps     {}\n", ops.size());
  out += fmt::format("peak      {} bytes ({}, {:.1f}% of store-all) at op {}\n", e.peak_bytes,
                     format_bytes(e.peak_bytes), peak_pct, e.peak_step);
  out += fmt::format("cost      {:.10g} (makespan; CI {:+.2f}%)\n", e.cost, ci);
  if (args.timeline) {
    out += "\nop  name  memory_bytes\n";
    for (size_t i = 0; i < ops.size(); ++i)
      out += fmt::format("{} {} {}\n", i, format_sequence({&ops[i], 1}), e.timeline[i]);
  }
  emit(out, "");
}

void run_simulate(const SimulateArgs& args) {
  const Problem problem = read_problem(args.graph_path);
  if (problem.chain()) return simulate_chain_plan(problem, args);
  const Graph& g = *problem.graph();
  const Plan plan = read_plan_file(g, args.plan_path);
  const Evaluation e = simulate(g, plan.sequence, {.timeline = args.timeline});
  if (!e.valid) throw InputError(fmt::format("{}: invalid plan: {}", args.plan_path, e.error));
  const Baseline base = baseline(g);
  const SimulatedFigures f{.peak_bytes = e.peak_bytes,
                           .peak_step = e.peak_step,
                           .cost = e.cost,
                           .steps = plan.sequence.size(),
                           .baseline_peak_bytes = base.peak_bytes,
                           .baseline_cost = base.cost};
  const double peak_pct = f.peak_percent(), ci = f.cost_increase_percent();
  if (args.json) {
    emit_json(figures_json(f), args.timeline ? &e.timeline : nullptr);
    return;
  }
  std::string out = "valid     yes\n";
  out += fmt::format("steps     {}\n", plan.sequence.size());
  out += fmt::format("peak      {} bytes ({:.1f}% of baseline) at step {} ({})\n", e.peak_bytes,
                     peak_pct, e.peak_step,
                     escape_control(g.node(plan.sequence[static_cast<size_t>(e.peak_step)]).name));
  out += fmt::format("cost      {:.10g} (CI {:+.2f}%)\n", e.cost, ci);
  if (args.timeline) {
    out += "\nstep  node  memory_bytes\n";
    for (size_t t = 0; t < e.timeline.size(); ++t)
      out += fmt::format("{} {} {}\n", t, escape_control(g.node(plan.sequence[t]).name),
                         e.timeline[t]);
  }
  emit(out, "");
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd =
      app.add_subcommand("simulate", "validity, peak, cost and memory over time of a plan");
  cmd->add_option("GRAPH", args->graph_path, "graph file")->required();
  cmd->add_option("PLAN", args->plan_path, "plan file (from remat solve -o)")->required();
  cmd->add_flag("--timeline", args->timeline, "print memory at every step");
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->callback([args] { run_simulate(*args); });
}

}  // namespace remat::cli
