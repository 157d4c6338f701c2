#include "checkmate_model/formulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "checkmate_model/decode.h"
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

// Steps after which v may be freed: its producer and its users (docs/solvers/checkmate.md, the
// model; with the self term).
std::vector<int32_t> free_steps(const Graph& g, ValueId v) {
  std::vector<int32_t> steps = {g.producer(v).value()};
  for (NodeId u : g.users(v)) steps.push_back(u.value());
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
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

void mark_outputs(const Graph& g, Retention& held) {
  for (ValueId v : g.graph_outputs())
    if (!g.is_graph_input(v)) held.set(g.num_nodes(), v, true);
}

}  // namespace

Decoded decode(const Graph& g, const Retention& held) {
  const int32_t T = g.num_nodes();
  Decoded d;
  IdVector<NodeId, char> run(static_cast<size_t>(T));
  const auto holds = [&](int32_t t, ValueId v) {
    return g.producer(v).value() < t && held.held(t, v);
  };
  for (int32_t t = 0; t < T; ++t) {
    std::fill(run.begin(), run.end(), 0);
    run[NodeId{t}] = 1;
    for (int32_t v = 0; v < g.num_values(); ++v) {
      const ValueId id{v};
      if (g.is_graph_input(id) || g.producer(id).value() > t) continue;
      if (held.held(t + 1, id) && !holds(t, id)) run[g.producer(id)] = 1;
    }
    for (int32_t k = t; k >= 0; --k) {
      if (!run[NodeId{k}]) continue;
      for (ValueId v : g.node(NodeId{k}).inputs)
        if (!g.is_graph_input(v) && !holds(t, v)) run[g.producer(v)] = 1;
    }
    for (int32_t k = 0; k <= t; ++k)
      if (run[NodeId{k}]) {
        d.sequence.push_back(NodeId{k});
        d.stage_of.push_back(t);
      }
  }
  return d;
}

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
  IdVector<NodeId, char> seen(static_cast<size_t>(T), 0);
  std::vector<IdVector<NodeId, char>> ran(static_cast<size_t>(T),
                                          IdVector<NodeId, char>(static_cast<size_t>(T), 0));
  std::vector<NodeId> pending;
  int32_t next_first = 0;
  for (NodeId n : sequence) {
    pending.push_back(n);
    if (seen[n]) continue;
    if (n.value() != next_first) return std::nullopt;
    seen[n] = 1;
    for (NodeId p : pending) ran[static_cast<size_t>(next_first)][p] = 1;
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
      if (held.held(t + 1, id) && !stage[g.producer(id)]) held.set(t, id, true);
    }
    for (int32_t k = 0; k <= t; ++k) {
      if (!stage[NodeId{k}]) continue;
      for (ValueId v : g.node(NodeId{k}).inputs)
        if (!g.is_graph_input(v) && !stage[g.producer(v)]) held.set(t, v, true);
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

}  // namespace remat::checkmate
