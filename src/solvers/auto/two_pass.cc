#include "auto/two_pass.h"

#include <fmt/format.h>

#include <algorithm>

#include "remat/error.h"
#include "remat/simulate.h"

namespace remat::auto_solver {
namespace {

std::vector<bool> membership(const Graph& g, std::span<const NodeId> nodes) {
  std::vector<bool> in(static_cast<size_t>(g.num_nodes()), false);
  for (NodeId n : nodes) in[static_cast<size_t>(n.value())] = true;
  return in;
}

// `g` without the nodes in `deferred` and the values they make; `original` maps back.
Graph without_nodes(const Graph& g, const std::vector<bool>& deferred,
                    std::vector<NodeId>& original) {
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
  const std::vector<bool> skip = membership(g, deferred);
  const std::vector<bool> required = required_nodes(g);
  int64_t resident = 0;
  for (ValueId v : g.graph_inputs()) resident += g.value(v).size_bytes;
  int64_t outputs_made = 0;  // graph outputs made so far: resident to the end
  int64_t floor = resident;
  for (int32_t n = 0; n < g.num_nodes(); ++n) {
    if (skip[static_cast<size_t>(n)] || !required[static_cast<size_t>(n)]) continue;
    const Node& node = g.node(NodeId{n});
    int64_t footprint = resident + outputs_made + node.temp_bytes;
    for (ValueId v : node.inputs)
      if (!g.is_graph_input(v) && !g.value(v).is_output) footprint += g.value(v).size_bytes;
    for (ValueId v : node.outputs) {
      footprint += g.value(v).size_bytes;
      if (g.value(v).is_output) outputs_made += g.value(v).size_bytes;
    }
    floor = std::max(floor, footprint);
  }
  return std::max(floor, resident + outputs_made);
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
  std::vector<NodeId> deferred = with_readers(g, candidates, enough);
  std::vector<NodeId> original;
  Graph first_pass = without_nodes(g, membership(g, deferred), original);
  return DeferredOutputs{.deferred = std::move(deferred),
                         .first_pass = std::move(first_pass),
                         .original = std::move(original),
                         .first_pass_floor = floor_with(enough)};
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
  // What the first pass leaves resident: graph inputs and outputs. A non-recomputable node's value
  // cannot be made again, so the second pass reads it from its one run (the simulator keeps it
  // live until then).
  auto left_by_first_pass = [&](ValueId v) {
    if (g.is_graph_input(v)) return true;
    if (!made[static_cast<size_t>(v.value())]) return false;
    return g.value(v).is_output || !g.node(g.producer(v)).recomputable;
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

}  // namespace remat::auto_solver
