#include "remat/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "remat/error.h"
#include "remat/simulate.h"

namespace remat {
namespace {

constexpr std::string_view kKindNames[] = {"compute", "pointwise", "reduction",
                                           "view",    "random",    "other"};
constexpr std::string_view kPhaseNames[] = {"", "forward", "backward"};

std::string node_label(const GraphSpec& spec, int32_t n) {
  return fmt::format("node {} ('{}')", n, shorten(spec.nodes[static_cast<size_t>(n)].name));
}
std::string value_label(const GraphSpec& spec, int32_t v) {
  return fmt::format("value {} ('{}')", v, shorten(spec.values[static_cast<size_t>(v)].name));
}

void fill_default_names(GraphSpec& spec) {
  for (size_t i = 0; i < spec.values.size(); ++i)
    if (spec.values[i].name.empty()) spec.values[i].name = fmt::format("v{}", i);
  for (size_t i = 0; i < spec.nodes.size(); ++i)
    if (spec.nodes[i].name.empty()) spec.nodes[i].name = fmt::format("n{}", i);
}

template <class Items>
void check_unique_names(const Items& items, std::string_view what, std::string_view source) {
  std::unordered_map<std::string_view, size_t> seen;
  for (size_t i = 0; i < items.size(); ++i) {
    auto [it, inserted] = seen.emplace(items[i].name, i);
    if (!inserted)
      throw InputError(fmt::format("{}: {} {} and {} have the same name '{}'", source, what,
                                   it->second, i, shorten(items[i].name)));
  }
}

void check_values(const GraphSpec& spec, std::string_view source) {
  const auto num_values = static_cast<int32_t>(spec.values.size());
  for (int32_t v = 0; v < num_values; ++v) {
    const Value& value = spec.values[static_cast<size_t>(v)];
    if (value.size_bytes < 0)
      throw InputError(fmt::format("{}: {} has negative size {}", source, value_label(spec, v),
                                   value.size_bytes));
    if (value.alias_of == kNoValue) continue;
    const int32_t root = value.alias_of.value();
    if (root < 0 || root >= num_values)
      throw InputError(fmt::format("{}: {} is an alias of value {}, which does not exist", source,
                                   value_label(spec, v), root));
    if (root == v)
      throw InputError(fmt::format("{}: {} is an alias of itself", source, value_label(spec, v)));
    if (value.size_bytes != 0)
      throw InputError(
          fmt::format("{}: {} is an alias but has size {} (aliases share their "
                      "root's storage and must have size 0)",
                      source, value_label(spec, v), value.size_bytes));
  }
}

void check_value_refs(const GraphSpec& spec, int32_t n, std::span<const ValueId> refs,
                      std::string_view role, std::string_view source) {
  for (ValueId v : refs)
    if (v.value() < 0 || v.value() >= static_cast<int32_t>(spec.values.size()))
      throw InputError(fmt::format("{}: {} has {} value {}, which does not exist", source,
                                   node_label(spec, n), role, v.value()));
}

void check_nodes(const GraphSpec& spec, std::string_view source) {
  if (spec.nodes.empty()) throw InputError(fmt::format("{}: the graph has no nodes", source));
  for (int32_t n = 0; n < static_cast<int32_t>(spec.nodes.size()); ++n) {
    const Node& node = spec.nodes[static_cast<size_t>(n)];
    if (!std::isfinite(node.cost) || node.cost < 0)
      throw InputError(fmt::format("{}: {} has invalid cost {} (must be finite and >= 0)", source,
                                   node_label(spec, n), node.cost));
    if (node.temp_bytes < 0)
      throw InputError(
          fmt::format("{}: {} has negative temp {}", source, node_label(spec, n), node.temp_bytes));
    check_value_refs(spec, n, node.inputs, "input", source);
    check_value_refs(spec, n, node.outputs, "output", source);
  }
}

// Sizes and temps are each >= 0 here (checked above); their running sum stays <= kMaxTotalBytes,
// so the additions cannot overflow.
void check_totals(const GraphSpec& spec, std::string_view source) {
  int64_t total = 0;
  auto add = [&](int64_t bytes, const std::string& what) {
    if (bytes > kMaxTotalBytes - total)
      throw InputError(fmt::format(
          "{}: {} brings the total of sizes and temps above the limit of 2^62 bytes ({})", source,
          what, kMaxTotalBytes));
    total += bytes;
  };
  for (int32_t v = 0; v < static_cast<int32_t>(spec.values.size()); ++v)
    add(spec.values[static_cast<size_t>(v)].size_bytes,
        fmt::format("{} of size {}", value_label(spec, v),
                    spec.values[static_cast<size_t>(v)].size_bytes));
  double total_cost = 0;
  for (int32_t n = 0; n < static_cast<int32_t>(spec.nodes.size()); ++n) {
    const Node& node = spec.nodes[static_cast<size_t>(n)];
    add(node.temp_bytes, fmt::format("{} with temp {}", node_label(spec, n), node.temp_bytes));
    total_cost += node.cost;
  }
  // A plan has fewer than 2^31 steps, each at most the total: below this its cost stays finite.
  constexpr double kMaxTotalCost = 1e298;
  if (!(total_cost <= kMaxTotalCost))
    throw InputError(fmt::format(
        "{}: the node costs add up to {:.4g}, above the limit of {:g} (so that the cost of any "
        "plan fits a double)",
        source, total_cost, kMaxTotalCost));
}

// Producer index per value; throws when a value has two producers.
IdVector<ValueId, int32_t> find_producers(const GraphSpec& spec, std::string_view source) {
  IdVector<ValueId, int32_t> producer(spec.values.size(), -1);
  for (int32_t n = 0; n < static_cast<int32_t>(spec.nodes.size()); ++n) {
    for (ValueId v : spec.nodes[static_cast<size_t>(n)].outputs) {
      int32_t& p = producer[v];
      if (p == n)
        throw InputError(fmt::format("{}: {} lists output {} twice", source, node_label(spec, n),
                                     value_label(spec, v.value())));
      if (p >= 0)
        throw InputError(fmt::format("{}: {} has two producers: {} and {}", source,
                                     value_label(spec, v.value()), node_label(spec, p),
                                     node_label(spec, n)));
      p = n;
    }
  }
  return producer;
}

// The storage root of every value, in linear time over all values: each chain of aliases is
// walked once and every value on it gets the root found at its end (100,000 chained aliases
// would otherwise take quadratic time).
std::vector<ValueId> alias_roots(const GraphSpec& spec, std::string_view source) {
  const size_t num_values = spec.values.size();
  std::vector<ValueId> root(num_values, kNoValue);
  std::vector<int8_t> on_path(num_values, 0);
  std::vector<int32_t> path;
  for (size_t start = 0; start < num_values; ++start) {
    path.clear();
    int32_t v = static_cast<int32_t>(start);
    while (root[static_cast<size_t>(v)] == kNoValue &&
           spec.values[static_cast<size_t>(v)].alias_of != kNoValue) {
      if (on_path[static_cast<size_t>(v)])
        throw InputError(
            fmt::format("{}: {} is part of a cycle of aliases", source, value_label(spec, v)));
      on_path[static_cast<size_t>(v)] = 1;
      path.push_back(v);
      v = spec.values[static_cast<size_t>(v)].alias_of.value();
    }
    const ValueId found =
        root[static_cast<size_t>(v)] != kNoValue ? root[static_cast<size_t>(v)] : ValueId{v};
    root[static_cast<size_t>(v)] = found;
    for (int32_t p : path) {
      root[static_cast<size_t>(p)] = found;
      on_path[static_cast<size_t>(p)] = 0;
    }
  }
  return root;
}

// Users of an alias also read its root, so the root stays live while any alias is used; an alias
// that is a graph output keeps its root to the end.
void rewrite_aliases(GraphSpec& spec, std::string_view source) {
  const std::vector<ValueId> root = alias_roots(spec, source);
  for (size_t v = 0; v < spec.values.size(); ++v)
    if (spec.values[v].is_output)
      spec.values[static_cast<size_t>(root[v].value())].is_output = true;
  for (Node& node : spec.nodes) {
    const size_t original = node.inputs.size();
    for (size_t i = 0; i < original; ++i)
      node.inputs.push_back(root[static_cast<size_t>(node.inputs[i].value())]);
  }
}

// Keeps the first occurrence of each input, in order; rejects a node reading its own output.
void dedupe_inputs(GraphSpec& spec, std::string_view source) {
  // stamp[v] == 2n: v is an output of node n; 2n + 1: v already kept as an input of node n.
  IdVector<ValueId, int64_t> stamp(spec.values.size(), -1);
  for (int32_t n = 0; n < static_cast<int32_t>(spec.nodes.size()); ++n) {
    Node& node = spec.nodes[static_cast<size_t>(n)];
    const int64_t output_stamp = 2 * static_cast<int64_t>(n);
    for (ValueId v : node.outputs) stamp[v] = output_stamp;
    std::vector<ValueId> unique;
    unique.reserve(node.inputs.size());
    for (ValueId v : node.inputs) {
      int64_t& s = stamp[v];
      if (s == output_stamp)
        throw InputError(fmt::format("{}: {} reads its own output {}", source, node_label(spec, n),
                                     value_label(spec, v.value())));
      if (s == output_stamp + 1) continue;
      s = output_stamp + 1;
      unique.push_back(v);
    }
    node.inputs = std::move(unique);
  }
}

// Finds a dependency cycle, if any, and returns it in data-flow order: "a -> b -> a" (b reads a).
std::string find_cycle(const GraphSpec& spec, const IdVector<ValueId, int32_t>& producer) {
  const size_t num_nodes = spec.nodes.size();
  std::vector<int8_t> state(num_nodes, 0);  // 0 new, 1 on stack, 2 done
  std::vector<int32_t> parent(num_nodes, -1);
  for (size_t start = 0; start < num_nodes; ++start) {
    if (state[start] != 0) continue;
    // Iterative DFS over "depends on" edges: node -> producer of each input.
    std::vector<std::pair<int32_t, size_t>> stack = {{static_cast<int32_t>(start), 0}};
    state[start] = 1;
    while (!stack.empty()) {
      auto& [n, next_input] = stack.back();
      const Node& node = spec.nodes[static_cast<size_t>(n)];
      if (next_input == node.inputs.size()) {
        state[static_cast<size_t>(n)] = 2;
        stack.pop_back();
        continue;
      }
      const int32_t dep = producer[node.inputs[next_input++]];
      if (dep < 0 || state[static_cast<size_t>(dep)] == 2) continue;
      if (state[static_cast<size_t>(dep)] == 1) {
        std::string cycle = fmt::format("'{}'", shorten(spec.nodes[static_cast<size_t>(dep)].name));
        for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
          cycle +=
              fmt::format(" -> '{}'", shorten(spec.nodes[static_cast<size_t>(it->first)].name));
          if (it->first == dep) break;
        }
        return cycle;
      }
      state[static_cast<size_t>(dep)] = 1;
      stack.emplace_back(dep, 0);
    }
  }
  return {};
}

void check_topological_order(const GraphSpec& spec, const IdVector<ValueId, int32_t>& producer,
                             std::string_view source) {
  const std::string cycle = find_cycle(spec, producer);
  if (!cycle.empty()) throw InputError(fmt::format("{}: the graph has a cycle: {}", source, cycle));
  for (int32_t n = 0; n < static_cast<int32_t>(spec.nodes.size()); ++n)
    for (ValueId v : spec.nodes[static_cast<size_t>(n)].inputs) {
      const int32_t p = producer[v];
      if (p > n)
        throw InputError(fmt::format(
            "{}: {} reads {} before its producer {} runs (the nodes array must be a "
            "topological order)",
            source, node_label(spec, n), value_label(spec, v.value()), node_label(spec, p)));
    }
}

}  // namespace

std::string_view to_string(OpKind kind) { return kKindNames[static_cast<int>(kind)]; }
std::string_view to_string(Phase phase) { return kPhaseNames[static_cast<int>(phase)]; }

std::optional<OpKind> parse_op_kind(std::string_view text) {
  for (size_t i = 0; i < std::size(kKindNames); ++i)
    if (kKindNames[i] == text) return static_cast<OpKind>(i);
  return std::nullopt;
}

std::optional<Phase> parse_phase(std::string_view text) {
  for (size_t i = 0; i < std::size(kPhaseNames); ++i)
    if (kPhaseNames[i] == text) return static_cast<Phase>(i);
  return std::nullopt;
}

Graph Graph::build(GraphSpec spec, std::string_view source) {
  fill_default_names(spec);
  check_unique_names(spec.values, "values", source);
  check_unique_names(spec.nodes, "nodes", source);
  check_values(spec, source);
  check_nodes(spec, source);
  check_totals(spec, source);
  const IdVector<ValueId, int32_t> producer = find_producers(spec, source);
  rewrite_aliases(spec, source);
  dedupe_inputs(spec, source);
  check_topological_order(spec, producer, source);

  Graph g;
  g.name_ = std::move(spec.name);
  for (Value& v : spec.values) g.values_.push_back(std::move(v));
  for (Node& n : spec.nodes) g.nodes_.push_back(std::move(n));
  g.producer_.assign(g.values_.size(), kNoNode);
  for (int32_t v = 0; v < static_cast<int32_t>(producer.size()); ++v)
    g.producer_[ValueId{v}] = NodeId{producer[ValueId{v}]};
  g.index();
  g.bounds_ = compute_bounds(g);
  return g;
}

void Graph::index() {
  const int32_t num_values = this->num_values();
  user_begin_.assign(static_cast<size_t>(num_values) + 1, 0);
  total_inputs_ = 0;
  for (const Node& node : nodes_) {
    for (ValueId v : node.inputs) ++user_begin_[static_cast<size_t>(v.value()) + 1];
    total_inputs_ += static_cast<int64_t>(node.inputs.size());
  }
  for (int32_t v = 0; v < num_values; ++v) user_begin_[v + 1] += user_begin_[v];
  user_ids_.assign(static_cast<size_t>(total_inputs_), kNoNode);
  std::vector<int32_t> fill(user_begin_.begin(), user_begin_.end() - 1);
  for (int32_t n = 0; n < num_nodes(); ++n)
    for (ValueId v : nodes_[NodeId{n}].inputs)
      user_ids_[static_cast<size_t>(fill[v.value()]++)] = NodeId{n};
  graph_inputs_.clear();
  graph_outputs_.clear();
  for (int32_t v = 0; v < num_values; ++v) {
    const ValueId id{v};
    if (is_graph_input(id)) graph_inputs_.push_back(id);
    if (values_[id].is_output) graph_outputs_.push_back(id);
    value_by_name_.emplace(values_[id].name, id);
  }
  for (int32_t n = 0; n < num_nodes(); ++n)
    node_by_name_.emplace(nodes_[NodeId{n}].name, NodeId{n});
}

std::span<const NodeId> Graph::users(ValueId v) const {
  const auto begin = static_cast<size_t>(user_begin_[static_cast<size_t>(v.value())]);
  const auto end = static_cast<size_t>(user_begin_[static_cast<size_t>(v.value()) + 1]);
  return std::span<const NodeId>(user_ids_).subspan(begin, end - begin);
}

std::optional<NodeId> Graph::find_node(std::string_view name) const {
  auto it = node_by_name_.find(std::string(name));
  if (it == node_by_name_.end()) return std::nullopt;
  return it->second;
}

std::optional<ValueId> Graph::find_value(std::string_view name) const {
  auto it = value_by_name_.find(std::string(name));
  if (it == value_by_name_.end()) return std::nullopt;
  return it->second;
}

std::string Graph::describe(NodeId n) const {
  return fmt::format("node {} ('{}')", n.value(), shorten(nodes_[n].name));
}
std::string Graph::describe(ValueId v) const {
  return fmt::format("value {} ('{}')", v.value(), shorten(values_[v].name));
}

}  // namespace remat
