// The auxiliary graph G' of Algorithm 1 and its minimum s-t cut (the shared min_cut library's
// integer flow network: Boost.Graph max-flow).
// Vertices: s, t; an in- and an out-vertex per V_f value; one vertex per node outside V_f (the
// paper's i_in for i not in V_f, which only leads to t). A multi-output V_f node links every
// input's out-vertex to every output's in-vertex, so each output is "a node" in the paper's sense.
#include <fmt/format.h>

#include <cmath>

#include "min_cut/min_cut.h"
#include "mincut/mincut.h"
#include "remat/error.h"

namespace remat::mincut {
namespace {

using Vertex = int32_t;

// Finite capacities are scaled to integers summing to at most 2^40 (about 12 significant
// digits); "infinite" is 2^42, above any finite cut, and small enough that push-relabel's initial
// preflow (one infinite push per source edge, at most 2^20 of them) cannot overflow int64.
constexpr double kFiniteTotal = 0x1p40;
constexpr int64_t kInfinite = int64_t{1} << 42;
constexpr int32_t kMaxVertices = 1 << 20;

class AuxiliaryGraph {
 public:
  AuxiliaryGraph(const Graph& graph, const JointAnalysis& a) : graph_(graph), a_(a) {
    number_vertices();
    g_ = min_cut::IntegerFlowNetwork(num_vertices_);
    add_edges();
  }

  Cut cut(MaxFlowAlgorithm algorithm) {
    const int64_t flow = g_.max_flow(kSource, kSink, algorithm);
    REMAT_CHECK(flow < kInfinite, "mincut: G' has no finite cut");
    Cut result = saved_set();
    int64_t cut_value = 0;
    for (ValueId v : result.saved) cut_value += scaled_[v];
    REMAT_CHECK(cut_value == flow,
                fmt::format("mincut: cut value {} differs from max flow {}", cut_value, flow));
    for (ValueId v : result.saved)
      REMAT_CHECK(a_.backward_relevant[v],
                  fmt::format("mincut: the cut saves {}, which no backward node needs",
                              graph_.describe(v)));
    result.capacity = cut_capacity(a_, result.saved);
    result.num_vertices = num_vertices_;
    result.num_edges = num_edges_;
    return result;
  }

 private:
  static constexpr Vertex kSource = 0, kSink = 1;

  void number_vertices() {
    in_vertex_.assign(static_cast<size_t>(graph_.num_values()), -1);
    node_vertex_.assign(static_cast<size_t>(graph_.num_nodes()), -1);
    int32_t next = 2;
    for (int32_t i = 0; i < graph_.num_values(); ++i)
      if (a_.in_vf[ValueId{i}]) {
        in_vertex_[ValueId{i}] = next;
        next += 2;  // the out-vertex is in + 1
      }
    for (int32_t i = 0; i < graph_.num_nodes(); ++i)
      if (!a_.node_in_vf[NodeId{i}]) node_vertex_[NodeId{i}] = next++;
    num_vertices_ = next;
    if (num_vertices_ > kMaxVertices)
      throw InputError(
          fmt::format("mincut: the auxiliary graph would have {} vertices (at most {})",
                      num_vertices_, kMaxVertices));
  }

  Vertex in(ValueId v) const { return static_cast<Vertex>(in_vertex_[v]); }
  Vertex out(ValueId v) const { return static_cast<Vertex>(in_vertex_[v] + 1); }

  void add_edge(Vertex from, Vertex to, int64_t capacity) {
    g_.add_edge(from, to, capacity);
    ++num_edges_;
  }

  void scale_capacities() {
    double total = 0;
    for (int32_t i = 0; i < graph_.num_values(); ++i) total += a_.capacity[ValueId{i}];
    const double scale = total > 0 ? kFiniteTotal / total : 0;
    scaled_.assign(static_cast<size_t>(graph_.num_values()), 0);
    for (int32_t i = 0; i < graph_.num_values(); ++i)
      scaled_[ValueId{i}] = std::llround(a_.capacity[ValueId{i}] * scale);
  }

  void add_edges() {
    scale_capacities();
    for (int32_t i = 0; i < graph_.num_values(); ++i) {
      const ValueId v{i};
      if (!a_.in_vf[v]) continue;
      const bool pinned =
          a_.forward_input[v] || (!graph_.is_graph_input(v) && a_.banned(graph_.producer(v)));
      if (pinned) add_edge(kSource, in(v), kInfinite);
      add_edge(in(v), out(v), scaled_[v]);
    }
    for (int32_t i = 0; i < graph_.num_nodes(); ++i) {
      const NodeId n{i};
      const Node& node = graph_.node(n);
      if (!a_.node_in_vf[n]) {
        const auto b = static_cast<Vertex>(node_vertex_[n]);
        add_edge(b, kSink, kInfinite);
        for (ValueId u : node.inputs)
          if (a_.in_vf[u]) add_edge(out(u), b, kInfinite);
        continue;
      }
      for (ValueId u : node.inputs)
        for (ValueId y : node.outputs) add_edge(out(u), in(y), kInfinite);
    }
  }

  // V_saved: values whose out-vertex reaches t in the residual graph and whose in-vertex does
  // not (the cut with the largest source side: values are saved as late as the cut allows, and a
  // zero-capacity value is saved only when the backward needs it through no cheaper route).
  Cut saved_set() const {
    const std::vector<bool> reaches_sink = g_.reaching(kSink);
    Cut result;
    for (int32_t i = 0; i < graph_.num_values(); ++i) {
      const ValueId v{i};
      if (a_.in_vf[v] && !reaches_sink[in(v)] && reaches_sink[out(v)]) result.saved.push_back(v);
    }
    return result;
  }

  const Graph& graph_;
  const JointAnalysis& a_;
  min_cut::IntegerFlowNetwork g_{0};
  IdVector<ValueId, int32_t> in_vertex_;
  IdVector<NodeId, int32_t> node_vertex_;
  IdVector<ValueId, int64_t> scaled_;
  int32_t num_vertices_ = 0;
  int32_t num_edges_ = 0;
};

}  // namespace

Cut find_min_cut(const Graph& graph, const JointAnalysis& analysis, MaxFlowAlgorithm algorithm) {
  AuxiliaryGraph aux(graph, analysis);
  return aux.cut(algorithm);
}

}  // namespace remat::mincut
