// graph_chain_bench — rotor on a traced graph, step by step: chain extraction,
// the persistent DP (500 bins) and the lowering (with its simulation) together under 0.2 s on a
// 2,000-node traced graph. Traced graphs come from bench/graph_chain_table.py (or any remat-graph
// JSON of a joint training step).
//   graph_chain_bench GRAPH.json [BUDGET=50%]...
#include <fmt/format.h>

#include <string>

#include "bench_main.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/lower.h"
#include "remat/registry.h"
#include "remat/simulate.h"
#include "timing.h"

namespace {

using namespace remat;

void run(const std::string& path, const std::string& budget_text) {
  const Graph g = read_graph_file(path);
  const Baseline base = baseline(g);
  const Budget budget = parse_budget(budget_text, base.peak_bytes);
  GraphChain gc;
  const double extract_s = bench::median_seconds(5, [&] { gc = extract_chain(g); });
  SolveOptions options;
  options.budget = {std::max<int64_t>(0, budget.bytes - gc.resident_bytes)};
  options.params = {{"bins", "500"}};
  ChainSolveResult r;
  const double dp_s = bench::median_seconds(5, [&] { r = solve(gc.chain, "rotor", options); });
  std::vector<StageRun> runs;
  for (const ChainOp& op : r.plan.sequence)
    runs.push_back({op.stage, op.kind == ChainOpKind::kBackward});
  Evaluation e;
  const double lower_s = bench::median_seconds(5, [&] {
    const Sequence seq = lower_chain_plan(g, gc, runs);
    e = simulate(g, seq);
  });
  const SolveOptions solve_options{.budget = budget, .params = {{"bins", "500"}}};
  SolveResult whole;
  const double solve_s =
      bench::median_seconds(3, [&] { whole = solve(g, "rotor", solve_options); });
  const double total = extract_s + dp_s + lower_s;
  fmt::print(
      "{:<40} {:>6} {:>6} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>6.1f}% {:>8.4f}  {}\n", g.name(),
      g.num_nodes(), gc.chain.stages.size(), extract_s, dp_s, lower_s, total,
      100.0 * static_cast<double>(whole.eval.peak_bytes) / static_cast<double>(base.peak_bytes),
      solve_s,
      g.num_nodes() >= 2000 ? (total < 0.2 ? "bar < 0.2 s: met" : "bar < 0.2 s: MISSED") : "");
}

}  // namespace

int main(int argc, char** argv) {
  constexpr std::string_view kUsage = "usage: graph_chain_bench GRAPH.json[=BUDGET] ...\n";
  if (argc < 2) {
    fmt::print(stderr, "{}", kUsage);
    return 2;
  }
  return remat::bench::guarded_main("graph_chain_bench", kUsage, argc, argv, [&] {
    fmt::print("{:<40} {:>6} {:>6} {:>9} {:>9} {:>9} {:>9} {:>7} {:>8}\n", "graph (budget 50%)",
               "nodes", "stages", "extract s", "DP s", "lower s", "total s", "peak", "solve s");
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i], budget = "50%";
      if (const size_t eq = arg.rfind('='); eq != std::string::npos)
        budget = arg.substr(eq + 1), arg = arg.substr(0, eq);
      run(arg, budget);
    }
    return 0;
  });
}
