#include "mincut/validity.h"

namespace remat::testing {

ForwardSet forward_set(const Graph& g) {
  ForwardSet f{std::vector<bool>(static_cast<size_t>(g.num_values()), false),
               std::vector<bool>(static_cast<size_t>(g.num_nodes()), false)};
  for (const Node& node : g.nodes())
    for (ValueId v : node.inputs)
      if (g.is_graph_input(v) && node.phase == Phase::kForward)
        f.value[static_cast<size_t>(v.value())] = true;
  for (int32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& node = g.node(NodeId{i});
    bool all = !node.inputs.empty();
    for (ValueId v : node.inputs) all = all && f.value[static_cast<size_t>(v.value())];
    f.node[static_cast<size_t>(i)] = node.phase == Phase::kForward || all;
    for (ValueId v : node.outputs)
      f.value[static_cast<size_t>(v.value())] = f.node[static_cast<size_t>(i)];
  }
  return f;
}

bool valid_saved(const Graph& g, const ForwardSet& f, const mincut::JointAnalysis& a,
                 const std::vector<ValueId>& saved) {
  std::vector<bool> have(static_cast<size_t>(g.num_values()), false);
  for (ValueId v : saved) {
    if (!f.value[static_cast<size_t>(v.value())]) return false;
    have[static_cast<size_t>(v.value())] = true;
  }
  for (ValueId v : g.graph_inputs())
    if (!f.value[static_cast<size_t>(v.value())]) have[static_cast<size_t>(v.value())] = true;
  for (int32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& node = g.node(NodeId{i});
    bool ready = true;
    for (ValueId v : node.inputs) ready = ready && have[static_cast<size_t>(v.value())];
    const bool in_vf = f.node[static_cast<size_t>(i)];
    if (!in_vf && !ready) return false;
    if (ready && (!in_vf || !a.banned(NodeId{i})))
      for (ValueId v : node.outputs) have[static_cast<size_t>(v.value())] = true;
  }
  return true;
}

}  // namespace remat::testing
