// remat info GRAPH: counts, baseline peak and cost, lower bounds.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "blocks/summary.h"
#include "common.h"
#include "problem.h"
#include "remat/io.h"
#include "remat/simulate.h"

namespace remat::cli {
namespace {

struct InfoArgs {
  std::string path;
  bool json = false;
  bool blocks = false;
};

// A chain: its length, times, store-all figures and the least budgets of the rotor families
// (each the min_feasible_budget of a judged solve at budget 0).
void chain_info(const Problem& problem, bool json) {
  const Chain& chain = *problem.chain();
  auto least_budget = [&](ParamMap params) {
    SolveOptions options;
    options.params = std::move(params);
    return *solve(chain, "rotor", options).plan.stats.min_feasible_budget;
  };
  const int64_t least_persistent = least_budget({});
  // The weak family's least budget is O(L^5) to compute; skip it on long chains.
  constexpr int kWeakInfoMaxLength = 60;
  const bool weak = chain.length() <= kWeakInfoMaxLength;
  const int64_t least_weak = weak ? least_budget({{"persistence", "weak"}}) : -1;
  double forward = 0, backward = 0;
  for (const ChainStage& s : chain.stages) forward += s.u_f, backward += s.u_b;
  if (json) {
    nlohmann::json doc = {{"name", chain.name},
                          {"length", chain.length()},
                          {"input_bytes", chain.input.a},
                          {"forward_time", forward},
                          {"backward_time", backward},
                          {"baseline_peak_bytes", problem.baseline_peak},
                          {"baseline_cost", problem.baseline_cost},
                          {"store_all_makespan", problem.baseline_cost},
                          {"store_all_peak_bytes", problem.baseline_peak},
                          {"least_budget_persistent_bytes", least_persistent}};
    if (weak) doc["least_budget_weak_bytes"] = least_weak;
    emit(doc.dump(2) + "\n", "");
    return;
  }
  std::string out = fmt::format("chain              {}\n", problem.display_name());
  out += fmt::format("length             {} stages + loss\n", chain.length());
  out +=
      fmt::format("input a^0          {} bytes ({})\n", chain.input.a, format_bytes(chain.input.a));
  out += fmt::format("forward, backward  {:.10g}, {:.10g}\n", forward, backward);
  out += fmt::format("store-all          makespan {:.10g}, peak {} bytes ({})\n",
                     problem.baseline_cost, problem.baseline_peak,
                     format_bytes(problem.baseline_peak));
  out += fmt::format("least budget       {} bytes ({}) persistent (rotor)\n", least_persistent,
                     format_bytes(least_persistent));
  if (weak)
    out += fmt::format("                   {} bytes ({}) any sequence (rotor, persistence=weak)\n",
                       least_weak, format_bytes(least_weak));
  emit(out, "");
}

// rk-GB's blocks (Rockmate): one line per block, then the classes of identical blocks.
void run_blocks(const Graph& g, const InfoArgs& args) {
  const rockmate::BlocksSummary bs = rockmate::describe_blocks(g);
  if (args.json) {
    nlohmann::json blocks = nlohmann::json::array(), classes = nlohmann::json::array();
    for (const rockmate::BlockSummary& b : bs.blocks)
      blocks.push_back({{"stage", b.stage},
                        {"class", b.class_id},
                        {"forward_nodes", b.forward_nodes},
                        {"backward_nodes", b.backward_nodes},
                        {"input_bytes", b.input_bytes},
                        {"output_bytes", b.output_bytes},
                        {"weight_bytes", b.weight_bytes},
                        {"first", b.first},
                        {"last", b.last}});
    for (const rockmate::ClassSummary& c : bs.classes)
      classes.push_back({{"hash", c.hash}, {"members", c.members}});
    nlohmann::json out{{"blocks", blocks}, {"classes", classes}};
    if (!bs.note.empty()) out["notes"] = {bs.note};
    emit(out.dump(2) + "\n", "");
    return;
  }
  std::string out =
      fmt::format("blocks           {} ({} classes)\n", bs.blocks.size(), bs.classes.size());
  out += "block  class  fwd  bwd       in B      out B   weight B  forward nodes\n";
  for (const rockmate::BlockSummary& b : bs.blocks)
    out += fmt::format("{:>5}  {:>5}  {:>3}  {:>3}  {:>9}  {:>9}  {:>9}  {} .. {}\n", b.stage,
                       b.class_id, b.forward_nodes, b.backward_nodes, b.input_bytes, b.output_bytes,
                       b.weight_bytes, b.first, b.last);
  for (size_t c = 0; c < bs.classes.size(); ++c)
    out += fmt::format("class {:>3}  hash {}  blocks {}\n", c, bs.classes[c].hash,
                       fmt::join(bs.classes[c].members, " "));
  if (!bs.note.empty()) out += fmt::format("note             {}\n", bs.note);
  emit(out, "");
}

void run_info(const InfoArgs& args) {
  const Problem problem = read_problem(args.path);
  if (problem.chain()) return chain_info(problem, args.json);
  const Graph& g = *problem.graph();
  if (args.blocks) return run_blocks(g, args);
  const Baseline base = baseline(g);
  const int64_t mem_lb = memory_lower_bound(g);
  const double cost_lb = cost_lower_bound(g);
  int64_t input_bytes = 0, max_temp = 0;
  for (ValueId v : g.graph_inputs()) input_bytes += g.value(v).size_bytes;
  int32_t forward = 0, backward = 0, fixed = 0;
  for (const Node& n : g.nodes()) {
    max_temp = std::max(max_temp, n.temp_bytes);
    forward += n.phase == Phase::kForward;
    backward += n.phase == Phase::kBackward;
    fixed += !n.recomputable;
  }
  if (args.json) {
    const nlohmann::json doc = {
        {"name", g.name()},
        {"nodes", g.num_nodes()},
        {"values", g.num_values()},
        {"edges", g.total_input_count()},
        {"graph_inputs", g.graph_inputs().size()},
        {"graph_input_bytes", input_bytes},
        {"graph_outputs", g.graph_outputs().size()},
        {"forward_nodes", forward},
        {"backward_nodes", backward},
        {"non_recomputable_nodes", fixed},
        {"max_temp_bytes", max_temp},
        {"baseline_peak_bytes", base.peak_bytes},
        {"baseline_cost", base.cost},
        {"memory_lower_bound_bytes", mem_lb},
        {"cost_lower_bound", cost_lb},
    };
    emit(doc.dump(2) + "\n", "");
    return;
  }
  std::string out = fmt::format("graph            {}\n", problem.display_name());
  out += fmt::format("nodes            {} ({} forward, {} backward, {} not recomputable)\n",
                     g.num_nodes(), forward, backward, fixed);
  out +=
      fmt::format("values           {} ({} graph inputs, {}; {} graph outputs)\n", g.num_values(),
                  g.graph_inputs().size(), format_bytes(input_bytes), g.graph_outputs().size());
  out += fmt::format("edges            {}\n", g.total_input_count());
  out += fmt::format("baseline peak    {} bytes ({})\n", base.peak_bytes,
                     format_bytes(base.peak_bytes));
  out += fmt::format("baseline cost    {:.10g}\n", base.cost);
  out += fmt::format("memory lower bd  {} bytes ({:.1f}% of baseline)\n", mem_lb,
                     percent(static_cast<double>(mem_lb), static_cast<double>(base.peak_bytes)));
  out += fmt::format("cost lower bd    {:.10g}\n", cost_lb);
  if (max_temp > 0) out += fmt::format("max temp         {} bytes\n", max_temp);
  emit(out, "");
}

}  // namespace

void register_info(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand("info", "counts, baseline peak and cost, lower bounds");
  cmd->add_option("GRAPH", args->path,
                  "graph or chain file (remat-graph, NetworkX or remat-chain JSON)")
      ->required();
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->add_flag("--blocks", args->blocks,
                "Rockmate's blocks and classes of identical blocks (joint graphs)");
  cmd->callback([args] { run_info(*args); });
}

}  // namespace remat::cli
