#include "auto/two_pass.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "min_cut/min_cut.h"
#include "remat/error.h"
#include "remat/simulate.h"

namespace remat::auto_solver {
namespace {

// Bisection steps of the price of a held byte (cheapest_keeping), and the most deferred sets
// defer_outputs compares: each step is a maximum flow over the graph.
constexpr int kPriceSteps = 20;
constexpr size_t kMaxDeferredSets = 12;
// drop_second_pass_reruns tries the dearest steps only, each a simulation of the whole plan.
constexpr size_t kMostDropTries = 64;
// A price of a held byte above any node's cost per byte it saves: the cut keeps only the values no
// node can make again, the fewest bytes of them.
constexpr double kOnlyWhatMustStay = 1e100;

std::vector<bool> membership(const Graph& g, std::span<const NodeId> nodes) {
  std::vector<bool> in(static_cast<size_t>(g.num_nodes()), false);
  for (NodeId n : nodes) in[static_cast<size_t>(n.value())] = true;
  return in;
}

// `g` without the nodes in `deferred` and the values they make, the values in `kept` made graph
// outputs (resident to its end); `original` maps back.
Graph without_nodes(const Graph& g, const std::vector<bool>& deferred,
                    const std::vector<bool>& kept, std::vector<NodeId>& original) {
  GraphSpec spec;
  spec.name = g.name();
  std::vector<bool> dropped(static_cast<size_t>(g.num_values()), false);
  for (int32_t n = 0; n < g.num_nodes(); ++n)
    if (deferred[static_cast<size_t>(n)])
      for (ValueId v : g.node(NodeId{n}).outputs) dropped[static_cast<size_t>(v.value())] = true;
  IdVector<ValueId, ValueId> local(static_cast<size_t>(g.num_values()), kNoValue);
  for (int32_t v = 0; v < g.num_values(); ++v) {
    if (dropped[static_cast<size_t>(v)]) continue;
    local[ValueId{v}] = ValueId{static_cast<int32_t>(spec.values.size())};
    spec.values.push_back(g.value(ValueId{v}));
    if (kept[static_cast<size_t>(v)]) spec.values.back().is_output = true;
  }
  // Graph::build has already made every reader of an alias read its root too, so the copies
  // carry that; an alias whose root was dropped (never the case for a deferred output's readers,
  // which are deferred themselves) loses only the link.
  for (Value& value : spec.values)
    if (value.alias_of.valid()) value.alias_of = local[value.alias_of];
  auto localise = [&](std::span<const ValueId> values) {
    std::vector<ValueId> out;
    out.reserve(values.size());
    for (ValueId v : values) {
      REMAT_CHECK(local[v].valid(), "two_pass: a kept node reads a deferred output");
      out.push_back(local[v]);
    }
    return out;
  };
  original.clear();
  for (int32_t n = 0; n < g.num_nodes(); ++n) {
    if (deferred[static_cast<size_t>(n)]) continue;
    Node node = g.node(NodeId{n});
    node.inputs = localise(node.inputs);
    node.outputs = localise(node.outputs);
    spec.nodes.push_back(std::move(node));
    original.push_back(NodeId{n});
  }
  return Graph::build(std::move(spec), fmt::format("{} (first pass)", g.name()));
}

// The first `count` candidates and every node reading what they make (deferrable too: a deferred
// output's readers run in the second pass), in the default order.
std::vector<NodeId> with_readers(const Graph& g, std::span<const NodeId> candidates, size_t count) {
  std::vector<bool> in = membership(g, candidates.first(count));
  std::vector<NodeId> out;
  for (NodeId n : candidates) {
    if (!in[static_cast<size_t>(n.value())]) continue;
    out.push_back(n);
    for (ValueId v : g.node(n).outputs)
      for (NodeId reader : g.users(v)) in[static_cast<size_t>(reader.value())] = true;
  }
  return out;
}

// estimate_first_pass_floor, with the nodes in `skip` not run and the values in `kept` resident
// from when they are made to the end, as graph outputs are.
int64_t floor_with_kept(const Graph& g, const std::vector<bool>& skip,
                        const std::vector<bool>& kept) {
  const std::vector<bool> required = required_nodes(g);
  auto stays = [&](ValueId v) {
    return g.value(v).is_output || kept[static_cast<size_t>(v.value())];
  };
  int64_t resident = 0;
  for (ValueId v : g.graph_inputs()) resident += g.value(v).size_bytes;
  int64_t stayed = 0;  // graph outputs and kept values made so far: resident to the end
  int64_t floor = resident;
  for (int32_t n = 0; n < g.num_nodes(); ++n) {
    if (skip[static_cast<size_t>(n)] || !required[static_cast<size_t>(n)]) continue;
    const Node& node = g.node(NodeId{n});
    int64_t footprint = resident + stayed + node.temp_bytes;
    for (ValueId v : node.inputs)
      if (!g.is_graph_input(v) && !stays(v)) footprint += g.value(v).size_bytes;
    for (ValueId v : node.outputs) {
      footprint += g.value(v).size_bytes;
      if (stays(v)) stayed += g.value(v).size_bytes;
    }
    floor = std::max(floor, footprint);
  }
  return std::max(floor, resident + stayed);
}

// What the second pass re-runs and what the first pass keeps for it, for one deferred set.
struct Keeping {
  std::vector<bool> kept;   // values the first pass leaves resident for the second pass
  double rerun_cost = 0;    // the second pass's nodes other than the deferred ones
  int64_t floor = 0;        // floor_with_kept
  int64_t second_peak = 0;  // second_pass_peak
};

// Whether the second pass finds `v` resident without keeping it: a graph input, or a graph output
// the first pass makes.
bool left_anyway(const Graph& g, const std::vector<bool>& deferred, ValueId v) {
  return g.is_graph_input(v) ||
         (g.value(v).is_output && !deferred[static_cast<size_t>(g.producer(v).value())]);
}

// The second pass's peak when it runs `second` (graph nodes, each once, in the default order)
// after a first pass that leaves the graph inputs, its graph outputs and `kept` resident: each
// value it makes lives until its last reader there (a graph output to the end), each kept value
// until its last reader.
int64_t second_pass_peak(const Graph& g, const std::vector<bool>& deferred,
                         const std::vector<bool>& kept, const std::vector<bool>& second) {
  const size_t values = static_cast<size_t>(g.num_values());
  std::vector<int32_t> last_read(values, -1);
  for (int32_t n = 0; n < g.num_nodes(); ++n)
    if (second[static_cast<size_t>(n)])
      for (ValueId v : g.node(NodeId{n}).inputs) last_read[static_cast<size_t>(v.value())] = n;
  int64_t live = 0;
  for (int32_t v = 0; v < g.num_values(); ++v)
    if (left_anyway(g, deferred, ValueId{v}) || kept[static_cast<size_t>(v)])
      live += g.value(ValueId{v}).size_bytes;
  int64_t peak = live;
  for (int32_t n = 0; n < g.num_nodes(); ++n) {
    if (!second[static_cast<size_t>(n)]) continue;
    const Node& node = g.node(NodeId{n});
    for (ValueId v : node.outputs) live += g.value(v).size_bytes;
    peak = std::max(peak, live + node.temp_bytes);
    auto dies = [&](ValueId v) {
      return !g.value(v).is_output && last_read[static_cast<size_t>(v.value())] <= n;
    };
    for (ValueId v : node.outputs)
      if (dies(v)) live -= g.value(v).size_bytes;
    for (ValueId v : node.inputs)
      if (last_read[static_cast<size_t>(v.value())] == n && !g.is_graph_input(v) &&
          (kept[static_cast<size_t>(v.value())] || !left_anyway(g, deferred, v)) && dies(v))
        live -= g.value(v).size_bytes;
  }
  return peak;
}

// The graph's nodes' total cost over its values' total bytes.
double cost_per_byte(const Graph& g) {
  double total_cost = 0, total_bytes = 1;
  for (const Node& node : g.nodes()) total_cost += node.cost;
  for (const Value& value : g.values()) total_bytes += static_cast<double>(value.size_bytes);
  return std::max(total_cost, 1.0) / total_bytes;
}

// The cheapest second pass when holding a byte to the end of the first pass costs `price`: a
// minimum cut where each node the second pass re-runs costs its cost, each value it reads is
// either kept (price x size) or made again by its producer, and the deferred nodes run.
Keeping keep_at_price(const Graph& g, const std::vector<bool>& deferred, double price) {
  const int32_t nodes = g.num_nodes(), values = g.num_values();
  const int32_t source = nodes + values, sink = source + 1;
  min_cut::MinCutNetwork flow(sink + 1);
  constexpr double kInfinite = min_cut::MinCutNetwork::kInfinite;
  for (int32_t n = 0; n < nodes; ++n) {
    const Node& node = g.node(NodeId{n});
    if (deferred[static_cast<size_t>(n)])
      flow.add_edge(source, n, kInfinite);
    else
      flow.add_edge(n, sink, node.recomputable ? node.cost : kInfinite);
    for (ValueId v : node.inputs)
      if (!left_anyway(g, deferred, v)) flow.add_edge(n, nodes + v.value(), kInfinite);
  }
  for (int32_t v = 0; v < values; ++v) {
    const ValueId id{v};
    if (left_anyway(g, deferred, id)) continue;
    const Value& value = g.value(id);
    const NodeId producer = g.producer(id);
    // An alias shares its root's storage and its readers read the root too: its producer (a view)
    // runs again instead, unless it cannot.
    const int64_t bytes =
        value.alias_of.valid() ? g.value(value.alias_of).size_bytes : value.size_bytes;
    const bool rerun_instead = value.alias_of.valid() && g.node(producer).recomputable;
    flow.add_edge(nodes + v, producer.value(),
                  rerun_instead ? kInfinite : price * static_cast<double>(bytes));
  }
  const std::vector<bool> side = flow.source_side(source, sink);
  Keeping k;
  k.kept.assign(static_cast<size_t>(values), false);
  std::vector<bool> second(static_cast<size_t>(nodes), false);
  for (int32_t n = 0; n < nodes; ++n) {
    second[static_cast<size_t>(n)] = side[static_cast<size_t>(n)];
    if (side[static_cast<size_t>(n)] && !deferred[static_cast<size_t>(n)])
      k.rerun_cost += g.node(NodeId{n}).cost;
  }
  for (int32_t v = 0; v < values; ++v) {
    const ValueId id{v};
    k.kept[static_cast<size_t>(v)] = !left_anyway(g, deferred, id) &&
                                     side[static_cast<size_t>(nodes + v)] &&
                                     !side[static_cast<size_t>(g.producer(id).value())];
  }
  k.floor = floor_with_kept(g, deferred, k.kept);
  k.second_peak = second_pass_peak(g, deferred, k.kept, second);
  return k;
}

// The cheapest second pass for `deferred` that fits: the first pass's floor estimate and the
// second pass's peak within `budget_bytes`. Found by bisecting the price of a held byte over twelve
// orders of magnitude around the graph's cost per byte: a lower price keeps more, so the floor and
// the second pass's peak only rise as the price falls, and the cheapest second pass that fits is
// at the lowest price that does. nullopt when not even keeping nothing fits.
std::optional<Keeping> cheapest_keeping(const Graph& g, const std::vector<bool>& deferred,
                                        int64_t budget_bytes) {
  const double unit = cost_per_byte(g);
  auto fits = [&](const Keeping& k) {
    return k.floor <= budget_bytes && k.second_peak <= budget_bytes;
  };
  double low = std::log(unit * 1e-6), high = std::log(unit * 1e6);
  Keeping cheapest = keep_at_price(g, deferred, std::exp(low));
  if (fits(cheapest)) return cheapest;
  std::optional<Keeping> best;
  if (Keeping none = keep_at_price(g, deferred, std::exp(high)); fits(none)) best = std::move(none);
  for (int step = 0; step < kPriceSteps && best; ++step) {
    const double mid = (low + high) / 2;
    Keeping k = keep_at_price(g, deferred, std::exp(mid));
    if (fits(k)) {
      high = mid;
      if (k.rerun_cost <= best->rerun_cost) best = std::move(k);
    } else {
      low = mid;
    }
  }
  return best;
}

}  // namespace

std::vector<NodeId> deferrable_outputs(const Graph& g) {
  std::vector<bool> deferrable(static_cast<size_t>(g.num_nodes()), false);
  // Readers come after their producer in the default order, so one backward sweep settles
  // "read only by deferrable nodes".
  for (int32_t n = g.num_nodes() - 1; n >= 0; --n) {
    const Node& node = g.node(NodeId{n});
    if (!node.recomputable || node.outputs.empty()) continue;
    const bool only_outputs = std::all_of(node.outputs.begin(), node.outputs.end(), [&](ValueId v) {
      if (!g.value(v).is_output) return false;
      const std::span<const NodeId> users = g.users(v);
      return std::all_of(users.begin(), users.end(),
                         [&](NodeId u) { return deferrable[static_cast<size_t>(u.value())]; });
    });
    deferrable[static_cast<size_t>(n)] = only_outputs;
  }
  std::vector<NodeId> out;
  for (int32_t n = 0; n < g.num_nodes(); ++n)
    if (deferrable[static_cast<size_t>(n)]) out.push_back(NodeId{n});
  return out;
}

int64_t estimate_first_pass_floor(const Graph& g, std::span<const NodeId> deferred) {
  return floor_with_kept(g, membership(g, deferred),
                         std::vector<bool>(static_cast<size_t>(g.num_values()), false));
}

std::optional<DeferredOutputs> defer_outputs(const Graph& g, int64_t budget_bytes) {
  const std::vector<NodeId> candidates = deferrable_outputs(g);
  auto floor_with = [&](size_t count) {
    return estimate_first_pass_floor(g, with_readers(g, candidates, count));
  };
  if (floor_with(0) <= budget_bytes || floor_with(candidates.size()) > budget_bytes)
    return std::nullopt;
  // Deferring more never raises the estimate, so the fewest that suffice are found by bisection.
  size_t too_few = 0, enough = candidates.size();
  while (enough - too_few > 1) {
    const size_t mid = too_few + (enough - too_few) / 2;
    (floor_with(mid) <= budget_bytes ? enough : too_few) = mid;
  }
  // Deferring more leaves room to keep values for the second pass, and may cost it less or more:
  // compare up to kMaxDeferredSets counts from the fewest to all, evenly spaced.
  const size_t span = candidates.size() - enough;
  const size_t sets = std::min(span + 1, kMaxDeferredSets);
  std::optional<std::pair<std::vector<NodeId>, Keeping>> best;
  for (size_t i = 0; i < sets; ++i) {
    const size_t count = enough + (sets > 1 ? i * span / (sets - 1) : 0);
    std::vector<NodeId> deferred = with_readers(g, candidates, count);
    std::optional<Keeping> k = cheapest_keeping(g, membership(g, deferred), budget_bytes);
    if (k && (!best || k->rerun_cost < best->second.rerun_cost))
      best.emplace(std::move(deferred), std::move(*k));
  }
  // None fits both estimates (the second pass in the default order over the budget, or values
  // only one run can make held through the first pass): the fewest deferrals, keeping only what
  // cannot be made again, and the runs after judge the plan.
  if (!best) {
    std::vector<NodeId> deferred = with_readers(g, candidates, enough);
    Keeping k = keep_at_price(g, membership(g, deferred), kOnlyWhatMustStay);
    best.emplace(std::move(deferred), std::move(k));
  }
  auto& [deferred, keeping] = *best;
  std::vector<NodeId> original;
  Graph first_pass = without_nodes(g, membership(g, deferred), keeping.kept, original);
  Graph first_pass_pinned = pin_dear_nodes(first_pass);
  std::vector<ValueId> kept;
  for (int32_t v = 0; v < g.num_values(); ++v)
    if (keeping.kept[static_cast<size_t>(v)]) kept.push_back(ValueId{v});
  return DeferredOutputs{.deferred = std::move(deferred),
                         .kept = std::move(kept),
                         .first_pass = std::move(first_pass),
                         .first_pass_pinned = std::move(first_pass_pinned),
                         .original = std::move(original),
                         .first_pass_floor = keeping.floor,
                         .second_pass_rerun_cost = keeping.rerun_cost};
}

Graph pin_dear_nodes(const Graph& g) {
  const double average = cost_per_byte(g);
  const std::vector<bool> required = required_nodes(g);
  GraphSpec spec;
  spec.name = g.name();
  spec.values.assign(g.values().begin(), g.values().end());
  for (int32_t n = 0; n < g.num_nodes(); ++n) {
    Node node = g.node(NodeId{n});
    int64_t bytes = 0;
    for (ValueId v : node.outputs) bytes += g.value(v).size_bytes;
    if (required[static_cast<size_t>(n)] && node.cost > average * static_cast<double>(bytes))
      node.recomputable = false;
    spec.nodes.push_back(std::move(node));
  }
  return Graph::build(std::move(spec), fmt::format("{} (dear nodes once)", g.name()));
}

Sequence two_pass_sequence(const Graph& g, const DeferredOutputs& d,
                           std::span<const NodeId> first_pass_plan) {
  Sequence out;
  out.reserve(first_pass_plan.size() + d.deferred.size());
  std::vector<bool> made(static_cast<size_t>(g.num_values()), false);
  for (NodeId local : first_pass_plan) {
    const NodeId n = d.original[static_cast<size_t>(local.value())];
    out.push_back(n);
    for (ValueId v : g.node(n).outputs) made[static_cast<size_t>(v.value())] = true;
  }
  // What the first pass leaves resident: graph inputs and outputs, and the values it keeps for
  // the second pass. A non-recomputable node's value cannot be made again, so the second pass
  // reads it from its one run (the simulator keeps it live until then).
  const std::vector<bool> kept = [&] {
    std::vector<bool> out(static_cast<size_t>(g.num_values()), false);
    for (ValueId v : d.kept) out[static_cast<size_t>(v.value())] = true;
    return out;
  }();
  auto left_by_first_pass = [&](ValueId v) {
    if (g.is_graph_input(v)) return true;
    if (!made[static_cast<size_t>(v.value())]) return false;
    return g.value(v).is_output || kept[static_cast<size_t>(v.value())] ||
           !g.node(g.producer(v)).recomputable;
  };
  std::vector<bool> needed = membership(g, d.deferred);
  std::vector<NodeId> stack(d.deferred.begin(), d.deferred.end());
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    for (ValueId v : g.node(n).inputs) {
      if (left_by_first_pass(v)) continue;
      const NodeId p = g.producer(v);
      if (needed[static_cast<size_t>(p.value())]) continue;
      needed[static_cast<size_t>(p.value())] = true;
      stack.push_back(p);
    }
  }
  for (int32_t n = 0; n < g.num_nodes(); ++n)
    if (needed[static_cast<size_t>(n)]) out.push_back(NodeId{n});
  return out;
}

Sequence drop_second_pass_reruns(const Graph& g, Sequence plan, size_t second_pass_start,
                                 int64_t budget_bytes) {
  std::vector<size_t> steps;
  for (size_t i = second_pass_start; i < plan.size(); ++i)
    if (g.node(plan[i]).cost > 0) steps.push_back(i);
  std::stable_sort(steps.begin(), steps.end(),
                   [&](size_t a, size_t b) { return g.node(plan[a]).cost > g.node(plan[b]).cost; });
  if (steps.size() > kMostDropTries) steps.resize(kMostDropTries);
  std::vector<bool> dropped(plan.size(), false);
  auto kept_steps = [&] {
    Sequence out;
    for (size_t i = 0; i < plan.size(); ++i)
      if (!dropped[i]) out.push_back(plan[i]);
    return out;
  };
  for (size_t step : steps) {
    dropped[step] = true;
    const Evaluation e = simulate(g, kept_steps());
    if (!e.valid || e.peak_bytes > budget_bytes) dropped[step] = false;
  }
  return kept_steps();
}

}  // namespace remat::auto_solver
