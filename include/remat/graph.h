// graph.h — the problem model every solver shares (docs/design.md §1).
// A Graph holds values (sized buffers) and nodes (operations reading and writing values). The
// order of the nodes is a valid topological order and is the default schedule. A Graph is built
// once from a GraphSpec, validated, and then immutable; aliases are rewritten at build time so
// each user of an alias also reads the alias's root storage (solvers never need alias_of).
//   GraphSpec spec;  spec.values = {{"x", 64}, {"y", 64, /*is_output=*/true}};
//   spec.nodes = {{.name = "relu", .cost = 1, .inputs = {ValueId{0}}, .outputs = {ValueId{1}}}};
//   Graph g = Graph::build(std::move(spec), "example");  // throws InputError if invalid
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "remat/ids.h"

namespace remat {

// What kind of operation a node is; the min-cut solver bans recomputation by kind.
enum class OpKind { kCompute, kPointwise, kReduction, kView, kRandom, kOther };
enum class Phase { kUnknown, kForward, kBackward };

std::string_view to_string(OpKind kind);
std::string_view to_string(Phase phase);
std::optional<OpKind> parse_op_kind(std::string_view text);
std::optional<Phase> parse_phase(std::string_view text);

// The sum of all value sizes and node temps in a graph may be at most 2^62 bytes (4 EiB);
// Graph::build rejects a graph above it, so every later sum of bytes (live memory, peaks, budgets
// plus one value) fits in int64_t by construction.
inline constexpr int64_t kMaxTotalBytes = int64_t{1} << 62;

struct Value {
  std::string name;
  int64_t size_bytes = 0;
  bool is_output = false;       // must be produced; stays resident to the end of the sequence
  ValueId alias_of = kNoValue;  // storage shared with this value (informational after build)
};

struct Node {
  std::string name;
  double cost = 0;  // any unit: FLOPs, microseconds
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::string op;
  OpKind kind = OpKind::kOther;
  Phase phase = Phase::kUnknown;
  int64_t temp_bytes = 0;  // node-intermediate memory, live only while the node runs
  bool recomputable = true;
};

// Raw, unvalidated description of a graph; Graph::build checks it.
struct GraphSpec {
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;
};

// What memory_lower_bound, cost_lower_bound and baseline (simulate.h) return, computed once when
// the graph is built: a solve's checks and a solver's set-up then need no pass over the graph,
// which on a million nodes is a good part of a one-second time limit.
struct GraphBounds {
  int64_t memory_lower_bound = 0;
  double cost_lower_bound = 0;
  int64_t baseline_peak_bytes = 0;
  double baseline_cost = 0;
  // Seconds the default schedule's simulation took: how long judging a plan of this graph takes
  // (the judged solve keeps that much of its time limit for it).
  double simulation_seconds = 0;
};

class Graph {
 public:
  // Validates `spec` and returns the graph. `source` (a file name, "python", ...) prefixes every
  // error message. Throws InputError naming the offending id.
  static Graph build(GraphSpec spec, std::string_view source);

  const std::string& name() const { return name_; }
  int32_t num_nodes() const { return static_cast<int32_t>(nodes_.size()); }
  int32_t num_values() const { return static_cast<int32_t>(values_.size()); }
  const Node& node(NodeId id) const { return nodes_[id]; }
  const Value& value(ValueId id) const { return values_[id]; }
  const IdVector<NodeId, Node>& nodes() const { return nodes_; }
  const IdVector<ValueId, Value>& values() const { return values_; }

  // kNoNode for graph inputs.
  NodeId producer(ValueId v) const { return producer_[v]; }
  bool is_graph_input(ValueId v) const { return !producer_[v].valid(); }
  // Nodes reading v (after alias rewrite), in node order, each once.
  std::span<const NodeId> users(ValueId v) const;
  std::span<const ValueId> graph_inputs() const { return graph_inputs_; }
  std::span<const ValueId> graph_outputs() const { return graph_outputs_; }
  int64_t total_input_count() const { return total_inputs_; }

  const GraphBounds& bounds() const { return bounds_; }

  std::optional<NodeId> find_node(std::string_view name) const;
  std::optional<ValueId> find_value(std::string_view name) const;
  // "node 12 ('relu_3')"; for messages.
  std::string describe(NodeId n) const;
  std::string describe(ValueId v) const;

 private:
  Graph() = default;
  void index();

  std::string name_;
  IdVector<ValueId, Value> values_;
  IdVector<NodeId, Node> nodes_;
  IdVector<ValueId, NodeId> producer_;
  std::vector<int32_t> user_begin_;  // CSR: users of v are user_ids_[user_begin_[v]..[v+1])
  std::vector<NodeId> user_ids_;
  std::vector<ValueId> graph_inputs_;
  std::vector<ValueId> graph_outputs_;
  int64_t total_inputs_ = 0;
  GraphBounds bounds_;
  std::unordered_map<std::string, NodeId> node_by_name_;
  std::unordered_map<std::string, ValueId> value_by_name_;
};

// A 128-bit hash (32 hex digits) of everything a plan depends on: nodes and values with their
// names, sizes, costs, kinds, phases and edges, but not the graph's name nor the nodes' temp bytes
// (a device's workspaces: a plan stays valid whatever they are). Plan files record it, and a plan
// is refused for a graph with another fingerprint.
std::string graph_fingerprint(const Graph& graph);

}  // namespace remat
