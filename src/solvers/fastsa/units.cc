#include "units.h"

#include <algorithm>
#include <optional>

#include "remat/error.h"

namespace remat::fastsa {
namespace {

// A unit while grouping: value lists are sorted and include graph inputs.
struct WorkUnit {
  std::vector<NodeId> members;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  bool recomputable = true;
  bool alive = true;
};

std::vector<int32_t> sorted_ids(std::span<const ValueId> ids) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (ValueId v : ids) out.push_back(v.value());
  std::sort(out.begin(), out.end());
  return out;
}

bool contains(const std::vector<int32_t>& sorted, int32_t x) {
  return std::binary_search(sorted.begin(), sorted.end(), x);
}

std::vector<int32_t> set_union(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::vector<int32_t> set_minus(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// Node-intermediate memory of a unit (Appendix B.1): at each member step, the values produced
// inside the unit that are not its outputs and are still needed (a member may run more than
// once in a group, each production opening an interval as in the simulator), plus the member's
// own temp. Together with the unit's inputs and outputs counted over its whole slot, this bounds
// the memory of every step of the expanded members from above.
// The unit of one node, before any grouping.
WorkUnit single_node_unit(const Graph& g, NodeId n) {
  const Node& node = g.node(n);
  WorkUnit u;
  u.members = {n};
  u.inputs = sorted_ids(node.inputs);
  u.outputs = sorted_ids(node.outputs);
  u.recomputable = node.recomputable;
  return u;
}

int64_t unit_temp(const Graph& g, std::span<const NodeId> members,
                  const std::vector<int32_t>& outputs) {
  if (members.size() == 1) return g.node(members[0]).temp_bytes;
  const auto steps = static_cast<int32_t>(members.size());
  std::vector<int32_t> values;
  for (NodeId n : members)
    for (ValueId v : g.node(n).outputs)
      if (!contains(outputs, v.value())) values.push_back(v.value());
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  auto index_of = [&](int32_t v) -> int32_t {
    auto it = std::lower_bound(values.begin(), values.end(), v);
    return it != values.end() && *it == v ? static_cast<int32_t>(it - values.begin()) : -1;
  };
  std::vector<int32_t> produced_at(values.size(), -1), last_use(values.size(), -1);
  std::vector<int64_t> delta(static_cast<size_t>(steps) + 1, 0);
  auto close = [&](size_t i) {
    const int64_t size = g.value(ValueId{values[i]}).size_bytes;
    delta[static_cast<size_t>(produced_at[i])] += size;
    delta[static_cast<size_t>(std::max(produced_at[i], last_use[i])) + 1] -= size;
  };
  for (int32_t k = 0; k < steps; ++k) {
    const Node& node = g.node(members[static_cast<size_t>(k)]);
    for (ValueId v : node.inputs)
      if (int32_t i = index_of(v.value()); i >= 0) last_use[static_cast<size_t>(i)] = k;
    for (ValueId v : node.outputs) {
      const int32_t i = index_of(v.value());
      if (i < 0) continue;
      if (produced_at[static_cast<size_t>(i)] >= 0) close(static_cast<size_t>(i));
      produced_at[static_cast<size_t>(i)] = k;
      last_use[static_cast<size_t>(i)] = k;
    }
  }
  for (size_t i = 0; i < values.size(); ++i)
    if (produced_at[i] >= 0) close(i);
  int64_t live = 0, worst = 0;
  for (int32_t k = 0; k < steps; ++k) {
    live += delta[static_cast<size_t>(k)];
    worst = std::max(worst, live + g.node(members[static_cast<size_t>(k)]).temp_bytes);
  }
  return worst;
}

// Between this many units the set-up checks its deadline.
constexpr int32_t kUnitsPerDeadlineCheck = 4096;

bool expired_at(int32_t i, const Deadline* deadline) {
  return deadline != nullptr && i % kUnitsPerDeadlineCheck == 0 && deadline->expired();
}

class Grouper {
 public:
  Grouper(const Graph& g, const GroupingParams& params) : g_(g), params_(params) {}

  std::optional<std::vector<WorkUnit>> run(const Deadline* deadline) {
    units_.resize(static_cast<size_t>(g_.num_nodes()));
    readers_.resize(static_cast<size_t>(g_.num_values()));
    unit_stamp_.assign(static_cast<size_t>(g_.num_nodes()), -1);
    for (int32_t n = 0; n < g_.num_nodes(); ++n) {
      if (expired_at(n, deadline)) return std::nullopt;
      WorkUnit& u = units_[static_cast<size_t>(n)];
      u = single_node_unit(g_, NodeId{n});
      for (int32_t v : u.inputs) readers_[static_cast<size_t>(v)].push_back(n);
    }
    for (int32_t i = 0; i < g_.num_nodes(); ++i) {
      if (expired_at(i, deadline)) return std::nullopt;
      try_fuse(i);
    }
    return std::move(units_);
  }

 private:
  // do_fuse of Appendix C.1, plus what keeps the grouped sequence valid when node i disappears:
  // its outputs are no graph outputs and every reader reads all of them.
  bool do_fuse(const WorkUnit& u) const {
    // A unit with no inputs is not fused: it would make every consumer input-free too, and the
    // fusion would cascade until the whole graph is one group (all of the MOCCASIN graphs start
    // from such a source node).
    if (!u.recomputable || u.outputs.empty() || u.inputs.empty()) return false;
    int64_t in_bytes = 0, out_bytes = 0;
    for (int32_t v : u.inputs) in_bytes += g_.value(ValueId{v}).size_bytes;
    for (int32_t v : u.outputs) {
      if (g_.value(ValueId{v}).is_output) return false;
      out_bytes += g_.value(ValueId{v}).size_bytes;
    }
    return in_bytes <= out_bytes;
  }

  // Alive units other than i whose inputs include an output of i, in order.
  std::vector<int32_t> consumers(int32_t i) {
    std::vector<int32_t> found;
    for (int32_t v : units_[static_cast<size_t>(i)].outputs)
      for (int32_t j : readers_[static_cast<size_t>(v)]) {
        const WorkUnit& u = units_[static_cast<size_t>(j)];
        if (j == i || !u.alive || unit_stamp_[static_cast<size_t>(j)] == i) continue;
        if (!contains(u.inputs, v)) continue;
        unit_stamp_[static_cast<size_t>(j)] = i;
        found.push_back(j);
      }
    std::sort(found.begin(), found.end());
    return found;
  }

  // The grouped node of §2.2.2: first's members, then second's. A node in both lists runs
  // twice: the group recomputes rather than keeps, which is the point of grouping.
  static WorkUnit fused(const WorkUnit& first, const WorkUnit& second) {
    WorkUnit g;
    g.members = first.members;
    g.members.insert(g.members.end(), second.members.begin(), second.members.end());
    g.inputs = set_union(first.inputs, set_minus(second.inputs, first.outputs));
    g.outputs = set_union(set_minus(first.outputs, second.inputs), second.outputs);
    g.recomputable = first.recomputable && second.recomputable;
    return g;
  }

  void try_fuse(int32_t i) {
    WorkUnit& u = units_[static_cast<size_t>(i)];
    if (!u.alive || !do_fuse(u)) return;
    const std::vector<int32_t> targets = consumers(i);
    if (targets.empty()) return;
    std::vector<WorkUnit> groups;
    groups.reserve(targets.size());
    for (int32_t j : targets) {
      const WorkUnit& consumer = units_[static_cast<size_t>(j)];
      for (int32_t v : u.outputs)
        if (!contains(consumer.inputs, v)) return;  // a reader that needs only some outputs
      groups.push_back(fused(u, consumer));
      const WorkUnit& g = groups.back();
      if (params_.max_group_size > 0 &&
          static_cast<int32_t>(g.members.size()) > params_.max_group_size)
        return;
      if (!set_minus(g.inputs, set_minus(g.inputs, g.outputs)).empty()) return;
    }
    for (size_t k = 0; k < targets.size(); ++k) {
      units_[static_cast<size_t>(targets[k])] = std::move(groups[k]);
      for (int32_t v : u.inputs) readers_[static_cast<size_t>(v)].push_back(targets[k]);
    }
    u.alive = false;
  }

  const Graph& g_;
  GroupingParams params_;
  std::vector<WorkUnit> units_;
  std::vector<std::vector<int32_t>> readers_;  // by value; may hold stale unit indices
  std::vector<int32_t> unit_stamp_;
};

// The table's value columns and resident bytes (the same for every grouping).
UnitTable value_table(const Graph& g) {
  UnitTable t;
  t.value_size.resize(static_cast<size_t>(g.num_values()));
  t.value_is_output.resize(static_cast<size_t>(g.num_values()));
  for (int32_t v = 0; v < g.num_values(); ++v) {
    t.value_size[static_cast<size_t>(v)] = g.value(ValueId{v}).size_bytes;
    t.value_is_output[static_cast<size_t>(v)] = g.value(ValueId{v}).is_output ? 1 : 0;
  }
  for (ValueId v : g.graph_inputs()) t.resident_bytes += g.value(v).size_bytes;
  return t;
}

std::optional<UnitTable> make_table(const Graph& g, const std::vector<WorkUnit>& units,
                                    const Deadline* deadline) {
  UnitTable t = value_table(g);
  for (size_t i = 0; i < units.size(); ++i) {
    const WorkUnit& u = units[i];
    if (expired_at(static_cast<int32_t>(i), deadline)) return std::nullopt;
    if (!u.alive) continue;
    for (int32_t v : u.inputs)
      if (!g.is_graph_input(ValueId{v})) t.input_ids.push_back(v);
    t.input_begin.push_back(static_cast<int32_t>(t.input_ids.size()));
    t.output_ids.insert(t.output_ids.end(), u.outputs.begin(), u.outputs.end());
    t.output_begin.push_back(static_cast<int32_t>(t.output_ids.size()));
    t.members.insert(t.members.end(), u.members.begin(), u.members.end());
    t.member_begin.push_back(static_cast<int32_t>(t.members.size()));
    double cost = 0;
    for (NodeId n : u.members) cost += g.node(n).cost;
    t.cost.push_back(cost);
    t.temp.push_back(unit_temp(g, u.members, u.outputs));
    t.recomputable.push_back(u.recomputable ? 1 : 0);
    t.initial_order.push_back(t.num_units() - 1);
  }
  return t;
}

}  // namespace

Sequence UnitTable::expand(std::span<const int32_t> units) const {
  Sequence seq;
  for (int32_t u : units) {
    const std::span<const NodeId> m = members_of(u);
    seq.insert(seq.end(), m.begin(), m.end());
  }
  return seq;
}

// Straight into the table's arrays: on a graph of a million nodes a unit object per node was most
// of the set-up.
std::optional<UnitTable> node_units(const Graph& graph, const Deadline* deadline) {
  UnitTable t = value_table(graph);
  const auto n = static_cast<size_t>(graph.num_nodes());
  for (auto* column : {&t.input_begin, &t.output_begin, &t.member_begin}) column->reserve(n + 1);
  t.members.reserve(n);
  t.cost.reserve(n);
  t.temp.reserve(n);
  t.recomputable.reserve(n);
  t.initial_order.reserve(n);
  for (int32_t i = 0; i < graph.num_nodes(); ++i) {
    if (expired_at(i, deadline)) return std::nullopt;
    const Node& node = graph.node(NodeId{i});
    const size_t inputs_from = t.input_ids.size(), outputs_from = t.output_ids.size();
    for (ValueId v : node.inputs)
      if (!graph.is_graph_input(v)) t.input_ids.push_back(v.value());
    for (ValueId v : node.outputs) t.output_ids.push_back(v.value());
    std::sort(t.input_ids.begin() + static_cast<std::ptrdiff_t>(inputs_from), t.input_ids.end());
    std::sort(t.output_ids.begin() + static_cast<std::ptrdiff_t>(outputs_from), t.output_ids.end());
    t.input_begin.push_back(static_cast<int32_t>(t.input_ids.size()));
    t.output_begin.push_back(static_cast<int32_t>(t.output_ids.size()));
    t.members.push_back(NodeId{i});
    t.member_begin.push_back(static_cast<int32_t>(t.members.size()));
    t.cost.push_back(node.cost);
    t.temp.push_back(node.temp_bytes);
    t.recomputable.push_back(node.recomputable ? 1 : 0);
    t.initial_order.push_back(i);
  }
  return t;
}

std::optional<UnitTable> group_units(const Graph& graph, const GroupingParams& params,
                                     const Deadline* deadline) {
  std::optional<std::vector<WorkUnit>> units = Grouper(graph, params).run(deadline);
  if (!units) return std::nullopt;
  return make_table(graph, *units, deadline);
}

}  // namespace remat::fastsa
