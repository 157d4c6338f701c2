// The block becomes a small graph: its nodes (less pure views, replayed at lowering), a loss
// placeholder between forward and backward that reads what the block hands on (a^ℓ) and produces
// the gradients later blocks send back, the values of other blocks and the weights as resident
// inputs, and what the backward hands on as outputs (block_model.h).
#include "block_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

#include "remat/error.h"

namespace remat::rockmate {
namespace {

// A pure view: weighs nothing, costs nothing, stays inside the block.
bool is_view(const Graph& g, const Block& b, NodeId n) {
  const Node& node = g.node(n);
  if (!node.recomputable || node.cost != 0 || node.temp_bytes != 0 || node.outputs.empty())
    return false;
  for (ValueId v : node.outputs) {
    if (g.value(v).size_bytes != 0 || g.value(v).is_output) return false;
    if (std::find(b.outputs.begin(), b.outputs.end(), v) != b.outputs.end()) return false;
  }
  return true;
}

}  // namespace

LocalOption keep_all(const Block& b) {
  LocalOption o;
  for (int32_t i = 0; i < static_cast<int32_t>(b.nodes.size()); ++i)
    (i < b.num_forward ? o.forward : o.backward).push_back(i);
  return o;
}

LocalOption keep_nothing(const Graph& g, const Block& b) {
  LocalOption o;
  for (int32_t i = 0; i < b.num_forward; ++i) {
    o.forward.push_back(i);
    if (g.node(b.nodes[static_cast<size_t>(i)]).recomputable) o.backward.push_back(i);
  }
  for (int32_t i = b.num_forward; i < static_cast<int32_t>(b.nodes.size()); ++i)
    o.backward.push_back(i);
  return o;
}

BlockModel block_model(const Graph& g, const Block& b) {
  BlockModel bm;
  GraphSpec spec;
  spec.name = fmt::format("block {}", b.stage);
  std::map<int32_t, ValueId> local;  // graph value -> sub-graph value
  IdVector<NodeId, uint8_t> in_block(static_cast<size_t>(g.num_nodes()), 0);
  for (NodeId n : b.nodes) in_block[n] = 1;
  std::vector<uint8_t> view(b.nodes.size(), 0);
  for (size_t i = 0; i < b.nodes.size(); ++i)
    if (is_view(g, b, b.nodes[i])) view[i] = 1, bm.dropped.push_back(static_cast<int32_t>(i));
  auto value_of = [&](ValueId v) {
    auto it = local.find(v.value());
    if (it != local.end()) return it->second;
    const ValueId id{static_cast<int32_t>(spec.values.size())};
    spec.values.push_back({.name = g.value(v).name, .size_bytes = g.value(v).size_bytes});
    local.emplace(v.value(), id);
    return id;
  };
  auto produced_here = [&](ValueId v) { return !g.is_graph_input(v) && in_block[g.producer(v)]; };
  // By the block's parts, not phases: a backward helper (lower.h) is a forward node in the
  // backward part.
  IdVector<NodeId, uint8_t> in_forward_part(static_cast<size_t>(g.num_nodes()), 0);
  for (int32_t i = 0; i < b.num_forward; ++i) in_forward_part[b.nodes[static_cast<size_t>(i)]] = 1;
  auto made_in_forward_part = [&](ValueId v) {
    return produced_here(v) && in_forward_part[g.producer(v)];
  };
  auto from_dropped = [&](ValueId v) {
    if (!produced_here(v)) return false;
    const auto it = std::find(b.nodes.begin(), b.nodes.end(), g.producer(v));
    return view[static_cast<size_t>(it - b.nodes.begin())] != 0;
  };
  auto add_node = [&](size_t i) {
    const Node& n = g.node(b.nodes[i]);
    Node copy{.name = n.name,
              .cost = n.cost,
              .op = n.op,
              .kind = n.kind,
              .phase = n.phase,
              .temp_bytes = n.temp_bytes,
              .recomputable = n.recomputable};
    for (ValueId v : n.inputs)
      if (!from_dropped(v)) copy.inputs.push_back(value_of(v));
    for (ValueId v : n.outputs) copy.outputs.push_back(value_of(v));
    spec.nodes.push_back(std::move(copy));
    bm.position.push_back(static_cast<int32_t>(i));
  };
  // Gradients from the blocks above: produced outside by backward nodes, read here.
  std::vector<ValueId> incoming;
  for (size_t i = static_cast<size_t>(b.num_forward); i < b.nodes.size(); ++i)
    for (ValueId v : g.node(b.nodes[i]).inputs)
      if (!g.is_graph_input(v) && !produced_here(v) &&
          g.node(g.producer(v)).phase == Phase::kBackward &&
          std::find(incoming.begin(), incoming.end(), v) == incoming.end())
        incoming.push_back(v);
  // Resident inputs first (values of blocks below and weights), so the loss's outputs are not.
  for (NodeId n : b.nodes)
    for (ValueId v : g.node(n).inputs)
      if (!produced_here(v) && std::find(incoming.begin(), incoming.end(), v) == incoming.end())
        value_of(v);
  for (size_t i = 0; i < static_cast<size_t>(b.num_forward); ++i)
    if (!view[i]) add_node(i);
  Node loss{.name = "loss placeholder",
            .cost = 0,
            .op = "rockmate.loss",
            .kind = OpKind::kOther,
            .phase = Phase::kForward,
            .temp_bytes = 0,
            .recomputable = false};
  for (ValueId v : b.outputs)
    if (made_in_forward_part(v) && g.value(v).size_bytes > 0 && !g.value(v).is_output)
      loss.inputs.push_back(value_of(v));
  for (ValueId v : incoming) loss.outputs.push_back(value_of(v));
  const ValueId token{static_cast<int32_t>(spec.values.size())};
  spec.values.push_back({.name = "loss token", .size_bytes = 0});
  loss.outputs.push_back(token);
  bm.loss = static_cast<int32_t>(spec.nodes.size());
  spec.nodes.push_back(std::move(loss));
  bm.position.push_back(-1);
  for (size_t i = static_cast<size_t>(b.num_forward); i < b.nodes.size(); ++i)
    if (!view[i]) add_node(i);
  // What the block hands on (and graph outputs) stays to the end.
  for (NodeId n : b.nodes)
    for (ValueId v : g.node(n).outputs) {
      const bool hands_on = g.value(v).is_output ||
                            (!in_forward_part[n] &&
                             std::find(b.outputs.begin(), b.outputs.end(), v) != b.outputs.end());
      if (hands_on && local.count(v.value()))
        spec.values[static_cast<size_t>(local[v.value()].value())].is_output = true;
    }
  bm.graph = Graph::build(std::move(spec), "rockmate block");
  const Graph& sub = *bm.graph;
  for (ValueId v : sub.graph_inputs()) bm.loss_floor += sub.value(v).size_bytes;
  for (ValueId v : sub.node(NodeId{bm.loss}).inputs) bm.loss_floor += sub.value(v).size_bytes;
  for (ValueId v : sub.node(NodeId{bm.loss}).outputs) bm.loss_floor += sub.value(v).size_bytes;
  return bm;
}

LocalOption to_option(const Graph& g, const Block& b, const BlockModel& bm, const Sequence& seq) {
  LocalOption o;
  IdVector<ValueId, int64_t> produced_at(static_cast<size_t>(g.num_values()), -1);
  std::vector<int64_t> ran_at(b.nodes.size(), -1);
  std::map<int32_t, int32_t> position_of;  // graph node -> block position
  for (size_t i = 0; i < b.nodes.size(); ++i)
    position_of[b.nodes[i].value()] = static_cast<int32_t>(i);
  std::vector<uint8_t> dropped(b.nodes.size(), 0);
  for (int32_t i : bm.dropped) dropped[static_cast<size_t>(i)] = 1;
  int64_t clock = 0;
  bool after_loss = false;
  auto emit = [&](int32_t pos) {
    (after_loss ? o.backward : o.forward).push_back(pos);
    ran_at[static_cast<size_t>(pos)] = clock;
    for (ValueId v : g.node(b.nodes[static_cast<size_t>(pos)]).outputs) produced_at[v] = clock;
    ++clock;
  };
  std::function<void(int32_t)> ready = [&](int32_t pos) {
    for (ValueId v : g.node(b.nodes[static_cast<size_t>(pos)]).inputs) {
      if (g.is_graph_input(v)) continue;
      const auto it = position_of.find(g.producer(v).value());
      if (it == position_of.end() || !dropped[static_cast<size_t>(it->second)]) continue;
      const int32_t d = it->second;
      bool stale = ran_at[static_cast<size_t>(d)] < 0;
      for (ValueId w : g.node(b.nodes[static_cast<size_t>(d)]).inputs)
        stale |= produced_at[w] > ran_at[static_cast<size_t>(d)];
      if (!stale) continue;
      ready(d);
      emit(d);
    }
  };
  for (NodeId n : seq) {
    const int32_t pos = bm.position[n];
    if (pos < 0) {
      after_loss = true;
      continue;
    }
    ready(pos);
    emit(pos);
  }
  // Views whose outputs nothing in the block reads still run once, in the forward (graph order).
  for (int32_t d : bm.dropped)
    if (ran_at[static_cast<size_t>(d)] < 0) {
      REMAT_CHECK(d < b.num_forward || after_loss, "rockmate: a backward view before the loss");
      auto& run = d < b.num_forward ? o.forward : o.backward;
      run.push_back(d);  // appended: reads nothing anyone else produces later
    }
  return o;
}

}  // namespace remat::rockmate
