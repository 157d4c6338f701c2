// retention_search.cc — the fixed-order searches over retentions: the greedy repair into the
// budget and the local search that removes recomputations (formulation.h declares both).
#include <algorithm>
#include <optional>
#include <random>

#include "checkmate_model/decode.h"
#include "checkmate_model/formulation.h"
#include "remat/simulate.h"

namespace remat::checkmate {
namespace {

// Dropping `value` from S over stages [from_stage, to_stage]: it is freed after its last use
// before the peak and recomputed in `to_stage` (its next use, or the end for a graph output).
struct DropChoice {
  ValueId value = kNoValue;
  int32_t from_stage = 0, to_stage = 0;
};

constexpr int32_t kRecomputeStages = 6;

// Every value held into the peak's stage, live at the peak and not read by the peak's node (so
// dropping it lowers the memory there), with the stage of its next use.
std::vector<DropChoice> candidate_drops(const Graph& g, const Decoded& plan, const Retention& held,
                                        int32_t peak) {
  const int32_t T = g.num_nodes();
  const auto steps = static_cast<int32_t>(plan.sequence.size());
  const int32_t stage = plan.stage_of[static_cast<size_t>(peak)];
  // First event of every value after the peak: a read (live) or a production (dead copy).
  IdVector<ValueId, int32_t> next_read(static_cast<size_t>(g.num_values()), -1);
  IdVector<ValueId, char> decided(static_cast<size_t>(g.num_values()), 0);
  for (int32_t q = peak + 1; q < steps; ++q) {
    const Node& node = g.node(plan.sequence[static_cast<size_t>(q)]);
    for (ValueId v : node.inputs)
      if (!decided[v]) {
        decided[v] = 1;
        next_read[v] = q;
      }
    for (ValueId v : node.outputs) decided[v] = 1;
  }
  const Node& running = g.node(plan.sequence[static_cast<size_t>(peak)]);
  std::vector<DropChoice> drops;
  for (int32_t v = 0; v < g.num_values(); ++v) {
    const ValueId id{v};
    if (!has_memory(g, id) || g.producer(id).value() >= stage || !held.held(stage, id)) continue;
    if (!g.node(g.producer(id)).recomputable) continue;
    if (std::find(running.inputs.begin(), running.inputs.end(), id) != running.inputs.end())
      continue;
    const int32_t next = next_read[id];
    if (next < 0 && (decided[id] || !g.value(id).is_output)) continue;  // dead
    // Recomputed in the stage of its next use, or earlier where memory may be lower: stages in
    // between, at most kRecomputeStages of them, evenly spread.
    const int32_t last = next < 0 ? T - 1 : plan.stage_of[static_cast<size_t>(next)];
    const int32_t span = last - stage;
    const int32_t tries = std::min(span + 1, kRecomputeStages);
    for (int32_t i = 0; i < tries; ++i) {
      const int32_t to = last - (tries == 1 ? 0 : span * i / (tries - 1));
      if (drops.empty() || drops.back().value != id || drops.back().to_stage != to)
        drops.push_back({id, stage, to});
    }
  }
  return drops;
}

// How far a plan is from the budget: its peak, and the memory above the budget summed over all
// steps (a peak shared by several steps falls only when all of them do; the sum sees each).
struct Excess {
  bool valid = false;
  int64_t peak = 0;
  double area = 0;
  double cost = 0;
  int32_t peak_step = -1;
};

Excess excess(const Graph& g, const Decoded& plan, int64_t budget) {
  const Evaluation e = simulate(g, plan.sequence, {.timeline = true});
  Excess x{e.valid, e.peak_bytes, 0, e.cost, e.peak_step};
  for (int64_t m : e.timeline) x.area += static_cast<double>(std::max<int64_t>(0, m - budget));
  return x;
}

void apply(Retention& held, const DropChoice& d, bool on) {
  for (int32_t t = d.from_stage; t <= d.to_stage; ++t) held.set(t, d.value, on);
}

// Work units of judging one plan of `g` in the retention searches.
double judging_work(const Graph& g) {
  return static_cast<double>(g.num_nodes()) * (g.num_nodes() + g.num_values()) /
         kRetentionStepsPerUnit;
}

}  // namespace

Retention repair_retention(const Graph& g, Retention start, int64_t budget_bytes, Limits& limits,
                           bool* cut_short, int64_t max_evaluations) {
  if (cut_short != nullptr) *cut_short = false;
  const double per_plan = judging_work(g);
  Retention held = std::move(start);
  Decoded plan = decode(g, held);
  Excess now = excess(g, plan, budget_bytes);
  limits.spend(per_plan);
  if (!now.valid) return held;
  int64_t evaluations = 0;
  // Greedy: of the drops at the peak's stage, take the one that removes the most memory above the
  // budget per unit of added cost, judged by simulating each (the furthest-next-use rule alone
  // chose drops whose recomputation cascaded, and stalled over the budget on RL 1 at 90 %).
  while (now.peak > budget_bytes) {
    if (limits.stop()) {
      if (cut_short != nullptr) *cut_short = true;
      break;
    }
    std::optional<DropChoice> chosen;
    Excess chosen_excess;
    double chosen_score = -1;
    for (const DropChoice& drop : candidate_drops(g, plan, held, now.peak_step)) {
      if (max_evaluations > 0 && evaluations == max_evaluations) return held;
      ++evaluations;
      apply(held, drop, false);
      const Excess after = excess(g, decode(g, held), budget_bytes);
      limits.spend(per_plan);
      apply(held, drop, true);
      if (!after.valid || after.area >= now.area) continue;
      const double score = (now.area - after.area) / (std::max(0.0, after.cost - now.cost) + 1e-9);
      if (score > chosen_score) {
        chosen = drop;
        chosen_excess = after;
        chosen_score = score;
      }
    }
    if (!chosen) break;
    apply(held, *chosen, false);
    plan = decode(g, held);
    now = chosen_excess;
  }
  return held;
}

namespace {

// The recomputations of a plan: positions whose node ran in an earlier stage too, with that stage.
struct Recomputation {
  NodeId node;
  int32_t previous_stage, stage;
};

std::vector<Recomputation> recomputations(const Graph& g, const Decoded& plan) {
  std::vector<Recomputation> out;
  IdVector<NodeId, int32_t> last_run(static_cast<size_t>(g.num_nodes()), -1);
  for (size_t q = 0; q < plan.sequence.size(); ++q) {
    const NodeId node = plan.sequence[q];
    const int32_t previous = last_run[node];
    last_run[node] = plan.stage_of[q];
    if (previous >= 0 && previous != plan.stage_of[q])
      out.push_back({node, previous, plan.stage_of[q]});
  }
  return out;
}

// Holds the node's outputs from its previous computation up to the recomputation instead.
void hold_instead(const Graph& g, const Recomputation& r, Retention& held) {
  for (ValueId v : g.node(r.node).outputs)
    if (has_memory(g, v))
      for (int32_t t = r.previous_stage + 1; t <= r.stage; ++t) held.set(t, v, true);
}

}  // namespace

Retention improve_retention(const Graph& g, Retention start, int64_t budget_bytes, Limits& limits,
                            uint64_t seed, bool* cut_short) {
  if (cut_short != nullptr) *cut_short = false;
  const double per_plan = judging_work(g);
  Retention held = std::move(start);
  Decoded plan = decode(g, held);
  Evaluation now = simulate(g, plan.sequence);
  limits.spend(per_plan);
  if (!now.valid || now.peak_bytes > budget_bytes) return held;
  // Keeps `trial` (repaired back into the budget) when it is cheaper.
  const auto try_move = [&](Retention trial) {
    trial = repair_retention(g, std::move(trial), budget_bytes, limits);
    Decoded trial_plan = decode(g, trial);
    const Evaluation e = simulate(g, trial_plan.sequence);
    limits.spend(per_plan);
    if (!e.valid || e.peak_bytes > budget_bytes || e.cost >= now.cost) return false;
    held = std::move(trial);
    plan = std::move(trial_plan);
    now = e;
    return true;
  };
  // 1. Passes over the recomputations until none can be removed alone: hold the node's outputs
  // instead and repair the result (it usually drops something else).
  bool improved = true;
  while (improved) {
    improved = false;
    for (const Recomputation& r : recomputations(g, plan)) {
      if (limits.stop()) break;
      Retention trial = held;
      hold_instead(g, r, trial);
      if ((improved = try_move(std::move(trial)))) break;  // positions changed: restart the pass
    }
  }
  // 2. Then, while time is left, a large neighbourhood: several recomputations at once, chosen at
  // random, stopping after kFailedLnsMoves tries in a row without a gain.
  constexpr int kFailedLnsMoves = 200;
  std::mt19937_64 rng(seed);
  for (int failed = 0; failed < kFailedLnsMoves && !limits.stop(); ++failed) {
    const std::vector<Recomputation> all = recomputations(g, plan);
    if (all.size() < 2) break;
    Retention trial = held;
    const int picks = 2 + static_cast<int>(rng() % 3);
    for (int i = 0; i < picks; ++i) hold_instead(g, all[rng() % all.size()], trial);
    if (try_move(std::move(trial))) failed = -1;
  }
  if (cut_short != nullptr) *cut_short = limits.stop();
  return held;
}

}  // namespace remat::checkmate
