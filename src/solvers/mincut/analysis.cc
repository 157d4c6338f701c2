// V_f, bans, materialisation and capacities of a joint graph (min-cut paper §3.1–§3.4).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "mincut/mincut.h"
#include "remat/error.h"

namespace remat::mincut {
namespace {

constexpr int32_t kFar = std::numeric_limits<int32_t>::max() / 2;

void check_phases(const Graph& graph) {
  int32_t unlabelled = 0;
  NodeId first;
  for (int32_t i = 0; i < graph.num_nodes(); ++i)
    if (graph.node(NodeId{i}).phase == Phase::kUnknown) {
      if (unlabelled++ == 0) first = NodeId{i};
    }
  if (unlabelled > 0)
    throw InputError(fmt::format(
        "mincut: {} of {} nodes have no phase (first: {}); the min-cut solver needs a joint "
        "forward+backward graph with every node labelled \"phase\": \"forward\" or \"backward\" "
        "(e.g. from `remat gen joint`)",
        unlabelled, graph.num_nodes(), graph.describe(first)));
}

// Fusible kinds: a fusing compiler can merge them with their neighbours (memory-bound ops).
bool fusible(OpKind kind) {
  return kind == OpKind::kPointwise || kind == OpKind::kReduction || kind == OpKind::kView ||
         kind == OpKind::kRandom;
}

// V_f: forward-phase nodes, and backward-phase nodes with at least one input, all in V_f (like
// `sin1` in the paper's Figure 2). Graph inputs read by a forward node are the forward inputs;
// other graph inputs and input-less backward nodes are gradient seeds.
// When that rule takes in every backward node, the gradient seed is computed from the forward
// (`ones_like(loss)` rather than a tangent input) and nothing would be left to cut: V_f is then
// the forward phase alone, the split the graph's `phase` labels give.
void find_vf(const Graph& graph, JointAnalysis& a) {
  for (ValueId v : graph.graph_inputs())
    for (NodeId u : graph.users(v))
      if (graph.node(u).phase == Phase::kForward) a.forward_input[v] = a.in_vf[v] = 1;
  const IdVector<ValueId, uint8_t> inputs_in_vf = a.in_vf;
  bool backward_outside = false, has_backward = false;
  for (int32_t i = 0; i < graph.num_nodes(); ++i) {
    const NodeId n{i};
    const Node& node = graph.node(n);
    bool all_vf = true;
    for (ValueId v : node.inputs) all_vf = all_vf && a.in_vf[v];
    if (node.phase == Phase::kForward && !all_vf) {
      for (ValueId v : node.inputs)
        if (!a.in_vf[v])
          throw InputError(fmt::format(
              "mincut: forward {} reads {}, which is not computable from the forward inputs (it "
              "depends on a gradient seed or a backward node)",
              graph.describe(n), graph.describe(v)));
    }
    a.node_in_vf[n] = node.phase == Phase::kForward || (all_vf && !node.inputs.empty());
    for (ValueId v : node.outputs) a.in_vf[v] = a.node_in_vf[n];
    has_backward = has_backward || node.phase == Phase::kBackward;
    backward_outside = backward_outside || !a.node_in_vf[n];
  }
  a.split_from_phase = has_backward && !backward_outside;
  if (!a.split_from_phase) return;
  a.in_vf = inputs_in_vf;
  for (int32_t i = 0; i < graph.num_nodes(); ++i) {
    const NodeId n{i};
    a.node_in_vf[n] = graph.node(n).phase == Phase::kForward;
    for (ValueId v : graph.node(n).outputs) a.in_vf[v] = a.node_in_vf[n];
  }
}

int64_t total_bytes(const Graph& graph, std::span<const ValueId> values) {
  int64_t sum = 0;
  for (ValueId v : values) sum += graph.value(v).size_bytes;
  return sum;
}

bool has_unfusible_backward_user(const Graph& graph, const JointAnalysis& a, NodeId n) {
  const OpKind kind = graph.node(n).kind;
  for (ValueId y : graph.node(n).outputs)
    for (NodeId u : graph.users(y))
      if (!a.node_in_vf[u] && !(fusible(kind) && fusible(graph.node(u).kind))) return true;
  return false;
}

BanReason ban_reason(const Graph& graph, const JointAnalysis& a, const MincutParams& p, NodeId n) {
  const Node& node = graph.node(n);
  if (!node.recomputable) return BanReason::kNotRecomputable;
  if (p.objective == Objective::kMemory) return BanReason::kNone;
  if (p.ban_random && node.kind == OpKind::kRandom) return BanReason::kRandom;
  if (p.ban_compute && (node.kind == OpKind::kCompute || node.kind == OpKind::kOther))
    return BanReason::kCompute;
  if (p.ban_reductions && node.kind == OpKind::kReduction &&
      static_cast<double>(total_bytes(graph, node.inputs)) >=
          p.reduction_ratio * static_cast<double>(total_bytes(graph, node.outputs)))
    return BanReason::kReduction;
  if (p.ban_unfusible && has_unfusible_backward_user(graph, a, n)) return BanReason::kUnfusible;
  return BanReason::kNone;
}

// Hops from each V_f value to the nearest backward-phase (or non-V_f) node, as PyTorch's
// dist_from_bw: a backward-phase node is at 0, a forward node at 1 + its nearest user.
void find_distances(const Graph& graph, JointAnalysis& a) {
  IdVector<NodeId, int32_t> node_distance(static_cast<size_t>(graph.num_nodes()), kFar);
  auto value_distance = [&](ValueId v) {
    int32_t d = kFar;
    for (NodeId u : graph.users(v)) d = std::min(d, node_distance[u] + 1);
    return d;
  };
  for (int32_t i = graph.num_nodes() - 1; i >= 0; --i) {
    const NodeId n{i};
    const Node& node = graph.node(n);
    if (!a.node_in_vf[n] || node.phase == Phase::kBackward) {
      node_distance[n] = 0;
    } else {
      for (ValueId y : node.outputs)
        node_distance[n] = std::min(node_distance[n], value_distance(y));
    }
    for (ValueId y : node.outputs) a.distance[y] = node_distance[n];
  }
  for (ValueId v : graph.graph_inputs()) a.distance[v] = value_distance(v);
}

bool is_materialized(const Graph& graph, ValueId v) {
  if (graph.is_graph_input(v) || graph.value(v).is_output) return true;
  if (!fusible(graph.node(graph.producer(v)).kind)) return true;
  for (NodeId u : graph.users(v))
    if (!fusible(graph.node(u).kind)) return true;
  return false;
}

double capacity(const Graph& graph, const JointAnalysis& a, const MincutParams& p, ValueId v) {
  const auto bytes = static_cast<double>(graph.value(v).size_bytes);
  if (p.objective == Objective::kMemory) {
    // Graph inputs stay resident for the whole run and outputs to its end: saving them is free.
    const bool resident = graph.is_graph_input(v) || graph.value(v).is_output;
    return resident ? 0.0 : bytes;
  }
  double w = bytes;
  if (p.reweight)
    w *= std::pow(p.reweight_base, std::clamp(a.distance[v], 1, kMaxReweightDistance));
  return a.materialized[v] ? w : kUnmaterializedSaveFactor * w;
}

void find_backward_relevant(const Graph& graph, JointAnalysis& a) {
  for (int32_t i = graph.num_nodes() - 1; i >= 0; --i) {
    const NodeId n{i};
    bool relevant = !a.node_in_vf[n];
    for (ValueId y : graph.node(n).outputs) relevant = relevant || a.backward_relevant[y];
    if (!relevant) continue;
    for (ValueId v : graph.node(n).inputs)
      if (a.in_vf[v]) a.backward_relevant[v] = 1;
  }
}

}  // namespace

std::string_view to_string(BanReason reason) {
  constexpr std::string_view kNames[] = {"none",    "not_recomputable", "random",
                                         "compute", "reduction",        "unfusible"};
  return kNames[static_cast<int>(reason)];
}

JointAnalysis analyze_joint(const Graph& graph, const MincutParams& params) {
  check_phases(graph);
  const auto num_values = static_cast<size_t>(graph.num_values());
  const auto num_nodes = static_cast<size_t>(graph.num_nodes());
  JointAnalysis a;
  a.in_vf.assign(num_values, 0);
  a.node_in_vf.assign(num_nodes, 0);
  a.forward_input.assign(num_values, 0);
  a.ban.assign(num_nodes, BanReason::kNone);
  a.materialized.assign(num_values, 0);
  a.distance.assign(num_values, kFar);
  a.capacity.assign(num_values, 0.0);
  a.backward_relevant.assign(num_values, 0);
  find_vf(graph, a);
  for (int32_t i = 0; i < graph.num_nodes(); ++i)
    if (a.node_in_vf[NodeId{i}]) a.ban[NodeId{i}] = ban_reason(graph, a, params, NodeId{i});
  find_distances(graph, a);
  find_backward_relevant(graph, a);
  for (int32_t i = 0; i < graph.num_values(); ++i) {
    const ValueId v{i};
    if (!a.in_vf[v]) continue;
    a.materialized[v] = is_materialized(graph, v);
    a.capacity[v] = capacity(graph, a, params, v);
  }
  return a;
}

double cut_capacity(const JointAnalysis& analysis, std::span<const ValueId> saved) {
  double sum = 0;
  for (ValueId v : saved) sum += analysis.capacity[v];
  return sum;
}

}  // namespace remat::mincut
