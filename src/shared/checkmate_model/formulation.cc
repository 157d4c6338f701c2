#include "checkmate_model/formulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "remat/error.h"
#include "remat/simulate.h"
#include "remat/toolkit.h"

namespace remat::checkmate {
namespace {

using milp::kInf;
using milp::Term;

size_t at(int32_t a, int32_t b, int32_t width) {
  return static_cast<size_t>(a) * static_cast<size_t>(width) + static_cast<size_t>(b);
}

// Inputs of n that some node produces, each once.
std::vector<ValueId> produced_inputs(const Graph& g, NodeId n) {
  std::vector<ValueId> out;
  for (ValueId v : g.node(n).inputs)
    if (!g.is_graph_input(v) && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  return out;
}

// Steps after which v may be freed: its producer and its users (spec §1.2, with the self term).
std::vector<int32_t> free_steps(const Graph& g, ValueId v) {
  std::vector<int32_t> steps = {g.producer(v).value()};
  for (NodeId u : g.users(v)) steps.push_back(u.value());
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
}

bool has_memory(const Graph& g, ValueId v) {
  return !g.is_graph_input(v) && g.value(v).size_bytes > 0;
}

int64_t graph_input_bytes(const Graph& g) {
  int64_t sum = 0;
  for (ValueId v : g.graph_inputs()) sum += g.value(v).size_bytes;
  return sum;
}

int64_t size_gcd(const Graph& g) {
  int64_t d = 0;
  for (int32_t v = 0; v < g.num_values(); ++v)
    if (has_memory(g, ValueId{v})) d = std::gcd(d, g.value(ValueId{v}).size_bytes);
  for (const Node& n : g.nodes())
    if (n.temp_bytes > 0) d = std::gcd(d, n.temp_bytes);
  return d > 0 ? d : 1;
}

// Sizes and temps (values in memory) in bytes.
int64_t model_bytes(const Graph& g) {
  int64_t sum = 0;
  for (int32_t v = 0; v < g.num_values(); ++v)
    if (has_memory(g, ValueId{v})) sum += g.value(ValueId{v}).size_bytes;
  for (const Node& n : g.nodes()) sum += n.temp_bytes;
  return sum;
}

// Memory in the model stays at most this many units of the size gcd: CBC's cut generators assert
// (abort the process) on memory rows of about 1e16 units, where tolerances are absolute.
constexpr int64_t kMaxSizeUnits = int64_t{1} << 40;

// gcd of the costs when all are integers below 2^50, else 1.
double cost_gcd(const Graph& g) {
  int64_t d = 0;
  for (const Node& n : g.nodes()) {
    if (n.cost != std::floor(n.cost) || n.cost < 0 || n.cost > 1e15) return 1;
    d = std::gcd(d, static_cast<int64_t>(n.cost));
  }
  return d > 0 ? static_cast<double>(d) : 1;
}

// Objective coefficients stay at most this large: Clp aborts the process (an assert, not an
// exception) on a coefficient of 1e25 or more, and costs are any finite numbers.
constexpr double kMaxObjectiveCoefficient = 0x1p50;

// The cost gcd, times a power of two when the largest cost over it is still above
// kMaxObjectiveCoefficient (a power of two divides exactly, so the objective is the same up to
// scale).
double cost_scale(const Graph& g) {
  double largest = 0;
  for (const Node& n : g.nodes()) largest = std::max(largest, n.cost);
  const double gcd = cost_gcd(g);
  if (largest / gcd <= kMaxObjectiveCoefficient) return gcd;
  int exponent = 0;
  std::frexp(largest / kMaxObjectiveCoefficient, &exponent);
  return std::ldexp(1.0, exponent);
}

struct Decoded {
  Sequence sequence;
  std::vector<int32_t> stage_of;  // stage of each position
};

Decoded decode(const Graph& g, const Retention& held) {
  const int32_t T = g.num_nodes();
  Decoded d;
  std::vector<char> run(static_cast<size_t>(T));
  const auto holds = [&](int32_t t, ValueId v) {
    return g.producer(v).value() < t && held.held(t, v);
  };
  for (int32_t t = 0; t < T; ++t) {
    std::fill(run.begin(), run.end(), 0);
    run[static_cast<size_t>(t)] = 1;
    for (int32_t v = 0; v < g.num_values(); ++v) {
      const ValueId id{v};
      if (g.is_graph_input(id) || g.producer(id).value() > t) continue;
      if (held.held(t + 1, id) && !holds(t, id))
        run[static_cast<size_t>(g.producer(id).value())] = 1;
    }
    for (int32_t k = t; k >= 0; --k) {
      if (!run[static_cast<size_t>(k)]) continue;
      for (ValueId v : g.node(NodeId{k}).inputs)
        if (!g.is_graph_input(v) && !holds(t, v))
          run[static_cast<size_t>(g.producer(v).value())] = 1;
    }
    for (int32_t k = 0; k <= t; ++k)
      if (run[static_cast<size_t>(k)]) {
        d.sequence.push_back(NodeId{k});
        d.stage_of.push_back(t);
      }
  }
  return d;
}

void mark_outputs(const Graph& g, Retention& held) {
  for (ValueId v : g.graph_outputs())
    if (!g.is_graph_input(v)) held.set(g.num_nodes(), v, true);
}

}  // namespace

ModelSize estimate_model_size(const Graph& g) {
  const int64_t T = g.num_nodes();
  ModelSize size;
  size.columns = T * (T + 1);  // R and U
  size.rows = T * (T + 1) / 2;
  size.nonzeros = 3 * size.rows;
  for (int32_t v = 0; v < g.num_values(); ++v) {
    const ValueId id{v};
    if (g.is_graph_input(id)) continue;
    const int64_t p = g.producer(id).value();
    const int64_t users = static_cast<int64_t>(g.users(id).size());
    size.columns += T - 1 - p;               // S
    size.rows += (T - 1 - p) * (1 + users);  // continuity + dependencies
    if (has_memory(g, id)) {
      const int64_t frees = (T - p) * (users + 1);  // upper estimate
      size.columns += frees;
      size.rows += frees * (2 + users / 2);
      size.nonzeros += frees * (5 + users);
    }
    size.nonzeros += (T - 1 - p) * (3 + 3 * users);
  }
  return size;
}

int32_t StageModel::r(int32_t t, int32_t i) const { return r_col[at(t, i, stages())]; }

int32_t StageModel::s(int32_t t, ValueId v) const {
  if (t <= 0 || t >= stages()) return -1;
  return s_col[at(t, v.value(), graph->num_values())];
}

StageModel build_stage_model(const Graph& g, int64_t budget_bytes) {
  const int32_t T = g.num_nodes();
  const int32_t V = g.num_values();
  StageModel sm;
  sm.graph = &g;
  sm.size_scale = size_gcd(g);
  sm.cost_scale = cost_scale(g);
  const int64_t units = model_bytes(g) / sm.size_scale;
  if (units > kMaxSizeUnits)
    throw UnsupportedGraph(fmt::format(
        "checkmate: the sizes and temps of '{}' add up to {} units of {} bytes (their gcd), above "
        "the 2^40 units the MILP/LP models take (CBC aborts on such rows); use another solver",
        shorten(g.name()), units, sm.size_scale));
  milp::MilpModel& m = sm.model;
  const int64_t room = budget_bytes - graph_input_bytes(g);
  // A budget above all sizes and temps never binds: the cap stays within the model's range.
  const double cap = room < 0 ? -1.0 : static_cast<double>(std::min(room / sm.size_scale, units));
  const auto scaled = [&](int64_t bytes) { return static_cast<double>(bytes / sm.size_scale); };

  sm.r_col.assign(static_cast<size_t>(T) * static_cast<size_t>(T), -1);
  for (int32_t t = 0; t < T; ++t)
    for (int32_t i = 0; i <= t; ++i) {
      const Node& node = g.node(NodeId{i});
      const double upper = (i == t || node.recomputable) ? 1 : 0;
      sm.r_col[at(t, i, T)] = m.add_column(i == t ? 1 : 0, upper, node.cost / sm.cost_scale, true);
    }
  sm.s_col.assign(static_cast<size_t>(T) * static_cast<size_t>(V), -1);
  for (int32_t t = 1; t < T; ++t)
    for (int32_t v = 0; v < V; ++v)
      if (!g.is_graph_input(ValueId{v}) && g.producer(ValueId{v}).value() < t)
        sm.s_col[at(t, v, V)] = m.add_column(0, 1, 0, true);

  // (C3) dependencies and (C5) continuity, with the virtual end row for graph outputs.
  for (int32_t t = 0; t < T; ++t)
    for (int32_t k = 0; k <= t; ++k)
      for (ValueId v : produced_inputs(g, NodeId{k})) {
        const int32_t p = g.producer(v).value();
        std::vector<Term> terms = {{sm.r(t, k), 1}, {sm.r(t, p), -1}};
        if (sm.s(t, v) >= 0) terms.push_back({sm.s(t, v), -1});
        m.add_row(-kInf, 0, terms);
      }
  for (int32_t t = 0; t < T; ++t)
    for (int32_t v = 0; v < V; ++v) {
      const ValueId id{v};
      if (g.is_graph_input(id) || g.producer(id).value() > t) continue;
      const int32_t p = g.producer(id).value();
      std::vector<Term> terms = {{sm.r(t, p), -1}};
      if (sm.s(t, id) >= 0) terms.push_back({sm.s(t, id), -1});
      if (t + 1 < T) {
        terms.push_back({sm.s(t + 1, id), 1});
        m.add_row(-kInf, 0, terms);
      } else if (g.value(id).is_output) {
        m.add_row(-kInf, -1, terms);
      }
    }

  // FREE(t,v,k) <= R(t,k), <= 1 - S(t+1,v), <= 1 - R(t,j) for later users j in the stage. Only
  // upper bounds: freeing never hurts the objective, so the solver sets FREE as high as allowed.
  // frees[t][k]: (column, scaled size) of the FREEs after step k of stage t.
  std::vector<std::vector<std::vector<Term>>> frees(static_cast<size_t>(T));
  for (int32_t t = 0; t < T; ++t) frees[static_cast<size_t>(t)].resize(static_cast<size_t>(t + 1));
  for (int32_t v = 0; v < V; ++v) {
    const ValueId id{v};
    if (!has_memory(g, id)) continue;
    const std::vector<int32_t> steps = free_steps(g, id);
    for (int32_t t = g.producer(id).value(); t < T; ++t)
      for (size_t a = 0; a < steps.size() && steps[a] <= t; ++a) {
        const int32_t k = steps[a];
        const bool kept_to_end = t + 1 == T && g.value(id).is_output;
        const int32_t col = m.add_column(0, kept_to_end ? 0 : 1, 0, false);
        frees[static_cast<size_t>(t)][static_cast<size_t>(k)].push_back(
            {col, scaled(g.value(id).size_bytes)});
        FreeVar record{col, t, k, id, {}};
        for (size_t b = a + 1; b < steps.size() && steps[b] <= t; ++b)
          record.later_steps.push_back(steps[b]);
        sm.frees.push_back(std::move(record));
        const std::vector<Term> by_run = {{col, 1}, {sm.r(t, k), -1}};
        m.add_row(-kInf, 0, by_run);
        if (t + 1 < T) {
          const std::vector<Term> by_kept = {{col, 1}, {sm.s(t + 1, id), 1}};
          m.add_row(-kInf, 1, by_kept);
        }
        for (size_t b = a + 1; b < steps.size() && steps[b] <= t; ++b) {
          const std::vector<Term> by_later = {{col, 1}, {sm.r(t, steps[b]), 1}};
          m.add_row(-kInf, 1, by_later);
        }
      }
  }

  // (C7)-(C9): U(t,k) memory after step k of stage t, within the (scaled) budget.
  for (int32_t t = 0; t < T; ++t) {
    int32_t previous = -1;
    for (int32_t k = 0; k <= t; ++k) {
      const Node& node = g.node(NodeId{k});
      const int32_t u = m.add_column(0, std::max(cap, 0.0), 0, false);
      std::vector<Term> terms = {{u, 1}};
      int64_t out_bytes = 0;
      for (ValueId v : node.outputs)
        if (has_memory(g, v)) out_bytes += g.value(v).size_bytes;
      terms.push_back({sm.r(t, k), -scaled(out_bytes)});
      if (previous < 0) {
        for (int32_t v = 0; v < V; ++v)
          if (sm.s(t, ValueId{v}) >= 0 && has_memory(g, ValueId{v}))
            terms.push_back({sm.s(t, ValueId{v}), -scaled(g.value(ValueId{v}).size_bytes)});
      } else {
        terms.push_back({previous, -1});
        for (const Term& f : frees[static_cast<size_t>(t)][static_cast<size_t>(k - 1)])
          terms.push_back({f.column, f.coefficient});
      }
      m.add_row(0, 0, terms);
      sm.memory_rows.push_back({u, terms});
      if (node.temp_bytes > 0 || cap < 0) {
        const std::vector<Term> peak = {{u, 1}, {sm.r(t, k), scaled(node.temp_bytes)}};
        m.add_row(-kInf, cap, peak);
      }
      previous = u;
    }
  }
  return sm;
}

Retention StageModel::retention(std::span<const double> x, double threshold) const {
  Retention held(stages(), graph->num_values());
  for (int32_t t = 1; t < stages(); ++t)
    for (int32_t v = 0; v < graph->num_values(); ++v) {
      const int32_t col = s(t, ValueId{v});
      if (col >= 0 && x[static_cast<size_t>(col)] >= threshold) held.set(t, ValueId{v}, true);
    }
  mark_outputs(*graph, held);
  return held;
}

Sequence sequence_from_retention(const Graph& g, const Retention& held) {
  return decode(g, held).sequence;
}

std::optional<Retention> retention_from_sequence(const Graph& g, const Sequence& sequence) {
  const int32_t T = g.num_nodes();
  // Stage of each position: the index of the next first computation.
  std::vector<char> seen(static_cast<size_t>(T), 0);
  std::vector<std::vector<char>> ran(static_cast<size_t>(T), std::vector<char>(T, 0));
  std::vector<NodeId> pending;
  int32_t next_first = 0;
  for (NodeId n : sequence) {
    pending.push_back(n);
    if (seen[static_cast<size_t>(n.value())]) continue;
    if (n.value() != next_first) return std::nullopt;
    seen[static_cast<size_t>(n.value())] = 1;
    for (NodeId p : pending)
      ran[static_cast<size_t>(next_first)][static_cast<size_t>(p.value())] = 1;
    pending.clear();
    ++next_first;
  }
  if (next_first != T || !pending.empty()) return std::nullopt;
  Retention held(T, g.num_values());
  mark_outputs(g, held);
  for (int32_t t = T - 1; t >= 1; --t) {
    const auto& stage = ran[static_cast<size_t>(t)];
    for (int32_t v = 0; v < g.num_values(); ++v) {
      const ValueId id{v};
      if (g.is_graph_input(id) || g.producer(id).value() >= t) continue;
      if (held.held(t + 1, id) && !stage[static_cast<size_t>(g.producer(id).value())])
        held.set(t, id, true);
    }
    for (int32_t k = 0; k <= t; ++k) {
      if (!stage[static_cast<size_t>(k)]) continue;
      for (ValueId v : g.node(NodeId{k}).inputs)
        if (!g.is_graph_input(v) && !stage[static_cast<size_t>(g.producer(v).value())])
          held.set(t, v, true);
    }
  }
  return held;
}

std::optional<std::vector<double>> StageModel::encode(const Sequence& sequence) const {
  const Graph& g = *graph;
  const int32_t T = stages();
  const std::optional<Retention> held = retention_from_sequence(g, sequence);
  if (!held) return std::nullopt;
  // R is what R-from-S needs for this retention: the stage-sorted decode of the same plan.
  const Decoded plan = decode(g, *held);
  std::vector<double> x(static_cast<size_t>(model.num_columns()), 0.0);
  std::vector<char> run(static_cast<size_t>(T) * static_cast<size_t>(T), 0);
  for (size_t q = 0; q < plan.sequence.size(); ++q)
    run[at(plan.stage_of[q], plan.sequence[q].value(), T)] = 1;
  for (int32_t t = 0; t < T; ++t)
    for (int32_t i = 0; i <= t; ++i) x[static_cast<size_t>(r(t, i))] = run[at(t, i, T)];
  for (int32_t t = 1; t < T; ++t)
    for (int32_t v = 0; v < g.num_values(); ++v)
      if (s(t, ValueId{v}) >= 0 && held->held(t, ValueId{v}))
        x[static_cast<size_t>(s(t, ValueId{v}))] = 1;
  // FREE is the product of its conditions, U follows its recurrence (both implied by R, S).
  const auto value_of = [&](int32_t col) { return col < 0 ? 0.0 : x[static_cast<size_t>(col)]; };
  for (const FreeVar& f : frees) {
    double on = value_of(r(f.stage, f.step));
    on = std::min(on, 1.0 - value_of(s(f.stage + 1, f.value)));
    for (int32_t j : f.later_steps) on = std::min(on, 1.0 - value_of(r(f.stage, j)));
    if (f.stage + 1 == T && g.value(f.value).is_output) on = 0;
    x[static_cast<size_t>(f.column)] = on;
  }
  for (const MemoryRow& row : memory_rows) {
    double sum = 0;
    for (const milp::Term& term : row.defining)
      if (term.column != row.u) sum -= term.coefficient * x[static_cast<size_t>(term.column)];
    x[static_cast<size_t>(row.u)] = sum;
  }
  if (model.max_violation(x) > 1e-6) return std::nullopt;
  return x;
}

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
  std::vector<int32_t> next_read(static_cast<size_t>(g.num_values()), -1);
  std::vector<char> decided(static_cast<size_t>(g.num_values()), 0);
  for (int32_t q = peak + 1; q < steps; ++q) {
    const Node& node = g.node(plan.sequence[static_cast<size_t>(q)]);
    for (ValueId v : node.inputs)
      if (!decided[static_cast<size_t>(v.value())]) {
        decided[static_cast<size_t>(v.value())] = 1;
        next_read[static_cast<size_t>(v.value())] = q;
      }
    for (ValueId v : node.outputs) decided[static_cast<size_t>(v.value())] = 1;
  }
  const Node& running = g.node(plan.sequence[static_cast<size_t>(peak)]);
  std::vector<DropChoice> drops;
  for (int32_t v = 0; v < g.num_values(); ++v) {
    const ValueId id{v};
    if (!has_memory(g, id) || g.producer(id).value() >= stage || !held.held(stage, id)) continue;
    if (!g.node(g.producer(id)).recomputable) continue;
    if (std::find(running.inputs.begin(), running.inputs.end(), id) != running.inputs.end())
      continue;
    const int32_t next = next_read[static_cast<size_t>(v)];
    if (next < 0 && (decided[static_cast<size_t>(v)] || !g.value(id).is_output)) continue;  // dead
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
  // chose drops whose recomputation cascaded: RL 1 at 90 % stalled at 95.5 % with CI +261 %).
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
  std::vector<int32_t> last_run(static_cast<size_t>(g.num_nodes()), -1);
  for (size_t q = 0; q < plan.sequence.size(); ++q) {
    const NodeId node = plan.sequence[q];
    const int32_t previous = last_run[static_cast<size_t>(node.value())];
    last_run[static_cast<size_t>(node.value())] = plan.stage_of[q];
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
