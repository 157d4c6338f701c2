#include "moccasin/moccasin.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string_view>

#include "moccasin/instance.h"
#include "remat/error.h"
#include "remat/params.h"

namespace remat::moccasin {
namespace {

constexpr std::string_view kName = "moccasin";
constexpr int64_t kMaxUnits = int64_t{1} << 30;  // room for sums inside Gecode's int32

// Sizes in units of `unit` bytes: sizes round up, the budget rounds down, so a plan that fits
// the model fits in bytes.
int64_t size_unit(const Graph& graph) {
  int64_t gcd = 0, total = 0;
  for (const Value& value : graph.values()) {
    gcd = std::gcd(gcd, value.size_bytes);
    total += value.size_bytes;
  }
  for (const Node& node : graph.nodes()) {
    gcd = std::gcd(gcd, node.temp_bytes);
    total += node.temp_bytes;
  }
  if (gcd == 0) return 1;
  const int64_t units = total / gcd;
  return gcd * std::max<int64_t>(1, (units + kMaxUnits - 1) / kMaxUnits);
}

// Integer costs are kept exactly when they fit; otherwise they are quantised to a total of 1e9
// (then "optimal" means optimal for the quantised costs; the simulator gives the true cost).
std::vector<int32_t> scaled_weights(const Graph& graph, int copies, bool& exact) {
  double total = 0;
  exact = true;
  for (const Node& node : graph.nodes()) {
    total += node.cost;
    if (node.cost != std::floor(node.cost)) exact = false;
  }
  exact = exact && total * copies <= 1e9;
  std::vector<int32_t> weights;
  for (const Node& node : graph.nodes())
    weights.push_back(static_cast<int32_t>(
        exact ? node.cost : std::llround(node.cost / std::max(total, 1e-300) * 1e9 / copies)));
  return weights;
}

struct Built {
  Instance instance;
  bool exact_costs = true;
};

Built build_instance(const Graph& graph, int64_t budget, int copies, bool staged) {
  Built built;
  Instance& inst = built.instance;
  inst.staged = staged;
  const int64_t unit = size_unit(graph);
  auto units = [&](int64_t bytes) { return static_cast<int32_t>((bytes + unit - 1) / unit); };
  int64_t inputs = 0;
  for (ValueId v : graph.graph_inputs()) inputs += graph.value(v).size_bytes;
  inst.capacity = static_cast<int32_t>(std::clamp<int64_t>((budget - inputs) / unit, 0, kMaxUnits));
  const std::vector<int32_t> weights = scaled_weights(graph, copies, built.exact_costs);
  const int32_t n = graph.num_nodes();
  // Where each value is produced: (position, output index).
  IdVector<ValueId, std::pair<int32_t, int32_t>> made_by(graph.num_values(), {-1, -1});
  for (int32_t p = 0; p < n; ++p) {
    const Node& node = graph.node(NodeId{p});
    NodeModel model;
    // C_v = 1 for non-recomputable nodes; in staged mode the last node has no later stage.
    model.copies = node.recomputable ? std::min(copies, staged ? n - p : copies) : 1;
    model.weight = weights[static_cast<size_t>(p)];
    model.temp = units(node.temp_bytes);
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const Value& value = graph.value(node.outputs[k]);
      model.outputs.push_back({units(value.size_bytes), value.is_output});
      made_by[node.outputs[k]] = {p, static_cast<int32_t>(k)};
    }
    for (ValueId input : node.inputs) {
      if (graph.is_graph_input(input)) continue;
      const auto [producer, output] = made_by[input];
      const Use use{producer, output};
      const bool seen = std::any_of(model.uses.begin(), model.uses.end(), [&](const Use& u) {
        return u.producer == use.producer && u.output == use.output;
      });
      if (!seen) model.uses.push_back(use);
    }
    inst.nodes.push_back(std::move(model));
  }
  return built;
}

Sequence to_sequence(const Solution& solution) {
  std::vector<std::pair<int32_t, int32_t>> events;  // (start, position)
  for (size_t p = 0; p < solution.copies.size(); ++p)
    for (const CopyValue& copy : solution.copies[p])
      if (copy.active) events.emplace_back(copy.start, static_cast<int32_t>(p));
  std::sort(events.begin(), events.end());
  Sequence sequence;
  for (const auto& [start, position] : events) sequence.push_back(NodeId{position});
  return sequence;
}

struct MoccasinParams {
  int64_t copies = 2;  // C_v
  bool fixed_order = true;
  bool afc_branching = false;
  bool scattered_lns = true;
  double lns_fraction = 0.4;
  double proof_fraction = 0.3;
  bool phase1 = true;
};

const ParamTable<MoccasinParams>& param_table() {
  using P = MoccasinParams;
  static const ParamTable<P> table(
      kName,
      {
          {{"c", "2", "copies", "copies per node `C_v` (1..64), the first computation included"},
           integer(&P::copies, 1, 64)},
          {{"order", "`fixed`", "",
            "`fixed`: staged events in the node order; `free`: events `1..Σ C_v`, all-different"},
           choice(&P::fixed_order, {{"fixed", true}, {"free", false}})},
          {{"branch", "`order`", "", "`order` (above) or `afc`"},
           choice(&P::afc_branching, {{"order", false}, {"afc", true}})},
          {{"lns", "`scattered`", "",
            "LNS neighbourhood: `scattered` (random nodes) or `window` (consecutive nodes)"},
           choice(&P::scattered_lns, {{"scattered", true}, {"window", false}})},
          {{"lns_fraction", "0.4", "share",
            "share of the order relaxed by one LNS restart, in (0, 1]"},
           real(&P::lns_fraction, 0.0, 1.0, /*above_min=*/true)},
          {{"proof_fraction", "0.3", "share",
            "share of each phase's time for the complete search, in (0, 1]"},
           real(&P::proof_fraction, 0.0, 1.0, /*above_min=*/true)},
          {{"phase1", "`true`", "",
            "`false`: skip phase 1 (phase 2 alone must find a plan within budget)"},
           flag(&P::phase1)},
      });
  return table;
}

class MoccasinSolver final : public Solver {
 public:
  std::string_view name() const override { return kName; }

  std::span<const ParamInfo> params() const override { return param_table().info(); }

  Plan solve(const Graph& graph, const SolveOptions& options) override {
    const MoccasinParams p = param_table().parse(options.params);
    SearchParams search;
    search.threads = options.threads;
    search.seed = options.seed;
    search.afc_branching = p.afc_branching;
    search.lns_fraction = p.lns_fraction;
    search.proof_fraction = p.proof_fraction;
    search.scattered_lns = p.scattered_lns;
    const bool run_phase1 = p.phase1;
    const int64_t copies = p.copies;
    const bool fixed_order = p.fixed_order;

    const Deadline clock(options.time_limit_s);
    const Built built =
        build_instance(graph, options.budget.bytes, static_cast<int>(copies), fixed_order);
    Plan plan;
    plan.sequence = default_schedule(graph);
    plan.stats.status = SolveStatus::kFeasible;
    if (graph.num_nodes() == 0) return plan;

    // Phase 1 (min max(M_var, M)) from the no-recomputation plan; it stops as soon as a plan fits.
    search.time_limit_s = options.time_limit_s * 0.5;
    PhaseResult phase1;
    if (run_phase1) phase1 = solve_phase1(built.instance, nullptr, search);
    const bool fits =
        !run_phase1 || (phase1.found && phase1.best.objective <= built.instance.capacity);
    PhaseResult phase2;
    if (fits) {
      search.time_limit_s = std::max(0.05, options.time_limit_s - clock.elapsed_s());
      phase2 = solve_phase2(built.instance, run_phase1 ? &phase1.best : nullptr, search);
    }
    const PhaseResult& final_phase = phase2.found ? phase2 : phase1;
    if (final_phase.found) {
      Sequence sequence = to_sequence(final_phase.best);
      // Never worse than the start (the default schedule): judge both in the simulator.
      const Evaluation mine = simulate(graph, sequence);
      const Evaluation start = simulate(graph, plan.sequence);
      REMAT_CHECK(mine.valid, fmt::format("moccasin: model plan is invalid: {}", mine.error));
      const int64_t budget = options.budget.bytes;
      const bool mine_fits = mine.peak_bytes <= budget, start_fits = start.peak_bytes <= budget;
      const bool better = mine_fits != start_fits ? mine_fits
                          : mine_fits             ? mine.cost <= start.cost
                                                  : mine.peak_bytes <= start.peak_bytes;
      if (better) plan.sequence = std::move(sequence);
    }
    const bool proved = phase2.found && phase2.proved && built.exact_costs;
    plan.stats.status = proved ? SolveStatus::kOptimal : SolveStatus::kFeasible;
    plan.stats.iterations = phase1.nodes + phase2.nodes;
    plan.stats.add_counter("phase1_solutions", static_cast<double>(phase1.solutions));
    plan.stats.add_counter("phase1_proved", phase1.proved ? 1 : 0);
    plan.stats.add_counter("phase2_solutions", static_cast<double>(phase2.solutions));
    plan.stats.add_counter("phase2_proved", phase2.proved ? 1 : 0);
    plan.stats.add_counter("failures", static_cast<double>(phase1.failures + phase2.failures));
    plan.stats.add_counter("restarts", static_cast<double>(phase1.restarts + phase2.restarts));
    plan.stats.add_counter("capacity_units", built.instance.capacity);
    // Without a proof the search ran on (LNS restarts) until its share of the time limit: the
    // plan then depends on how far it got (docs/solvers/moccasin.md, Determinism).
    plan.stats.add_counter("time_limit_hit", proved ? 0 : 1);
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> make() { return std::make_unique<MoccasinSolver>(); }

}  // namespace remat::moccasin
