#include "min_cut/min_cut.h"

#include <fmt/format.h>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <cmath>

#include "remat/error.h"

namespace remat::min_cut {
namespace {

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
struct FlowEdge {
  int64_t capacity = 0;
  int64_t residual = 0;
  Traits::edge_descriptor reverse;
};
using FlowGraph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, FlowEdge>;
using Vertex = Traits::vertex_descriptor;

// Finite capacities are scaled by a power of two to integers summing to less than 2^40 (about 12
// significant digits of their total; a power of two so that capacities exact in binary, such as
// whole numbers, scale exactly and their ties stay ties); "infinite" is 2^42, above any finite
// cut. The flow is at most what enters the sink, so it cannot overflow int64 while fewer than
// 2^20 infinite edges enter the sink.
constexpr int kFiniteTotalBits = 40;
constexpr int64_t kScaledInfinite = int64_t{1} << 42;
constexpr int64_t kMaxInfiniteIntoSink = int64_t{1} << 20;

// The vertices reachable from `start` along edges with residual capacity, followed forwards (from
// `start`) or backwards (to `start`: every edge u -> w is the reverse of one of w's out-edges).
std::vector<bool> residual_closure(const FlowGraph& g, Vertex start, bool backwards) {
  std::vector<bool> seen(boost::num_vertices(g), false);
  std::vector<Vertex> stack = {start};
  seen[start] = true;
  while (!stack.empty()) {
    const Vertex u = stack.back();
    stack.pop_back();
    for (const auto& e : boost::make_iterator_range(boost::out_edges(u, g))) {
      const Vertex w = boost::target(e, g);
      const int64_t residual = backwards ? g[g[e].reverse].residual : g[e].residual;
      if (residual > 0 && !seen[w]) {
        seen[w] = true;
        stack.push_back(w);
      }
    }
  }
  return seen;
}

}  // namespace

struct IntegerFlowNetwork::Storage {
  FlowGraph g;
};

IntegerFlowNetwork::IntegerFlowNetwork(int32_t vertices)
    : g_(std::make_unique<Storage>(Storage{FlowGraph(static_cast<size_t>(vertices))})) {}
IntegerFlowNetwork::~IntegerFlowNetwork() = default;
IntegerFlowNetwork::IntegerFlowNetwork(IntegerFlowNetwork&&) noexcept = default;
IntegerFlowNetwork& IntegerFlowNetwork::operator=(IntegerFlowNetwork&&) noexcept = default;

void IntegerFlowNetwork::add_edge(int32_t from, int32_t to, int64_t capacity) {
  FlowGraph& g = g_->g;
  const auto forward = boost::add_edge(static_cast<Vertex>(from), static_cast<Vertex>(to), g).first;
  const auto backward =
      boost::add_edge(static_cast<Vertex>(to), static_cast<Vertex>(from), g).first;
  g[forward] = FlowEdge{capacity, 0, backward};
  g[backward] = FlowEdge{0, 0, forward};
}

int64_t IntegerFlowNetwork::max_flow(int32_t source, int32_t sink, MaxFlowAlgorithm algorithm) {
  FlowGraph& g = g_->g;
  const auto idx = boost::get(boost::vertex_index, g);
  const auto cap = boost::get(&FlowEdge::capacity, g);
  const auto res = boost::get(&FlowEdge::residual, g);
  const auto rev = boost::get(&FlowEdge::reverse, g);
  const auto s = static_cast<Vertex>(source), t = static_cast<Vertex>(sink);
  return algorithm == MaxFlowAlgorithm::kPushRelabel
             ? boost::push_relabel_max_flow(g, s, t, cap, res, rev, idx)
             : boost::boykov_kolmogorov_max_flow(g, cap, res, rev, idx, s, t);
}

std::vector<bool> IntegerFlowNetwork::reached_from(int32_t source) const {
  return residual_closure(g_->g, static_cast<Vertex>(source), false);
}

std::vector<bool> IntegerFlowNetwork::reaching(int32_t sink) const {
  return residual_closure(g_->g, static_cast<Vertex>(sink), true);
}

MinCutNetwork::MinCutNetwork(int32_t vertices) : vertices_(vertices) {
  REMAT_CHECK(vertices >= 0, fmt::format("min_cut: {} vertices", vertices));
}

void MinCutNetwork::add_edge(int32_t from, int32_t to, double capacity) {
  REMAT_CHECK(from >= 0 && from < vertices_ && to >= 0 && to < vertices_,
              fmt::format("min_cut: edge {} -> {} outside {} vertices", from, to, vertices_));
  REMAT_CHECK(capacity >= 0, fmt::format("min_cut: edge {} -> {} has capacity {}", from, to,
                                         capacity));       // NaN fails too
  if (from != to) edges_.push_back({from, to, capacity});  // a loop crosses no cut
}

std::vector<bool> MinCutNetwork::source_side(int32_t source, int32_t sink) const {
  REMAT_CHECK(
      source >= 0 && source < vertices_ && sink >= 0 && sink < vertices_ && source != sink,
      fmt::format("min_cut: source {} and sink {} in {} vertices", source, sink, vertices_));
  double finite_total = 0;
  int64_t infinite_into_sink = 0;
  for (const Edge& e : edges_) {
    if (std::isinf(e.capacity))
      infinite_into_sink += e.to == sink;
    else
      finite_total += e.capacity;
  }
  REMAT_CHECK(infinite_into_sink < kMaxInfiniteIntoSink,
              fmt::format("min_cut: {} infinite edges into the sink (fewer than {})",
                          infinite_into_sink, kMaxInfiniteIntoSink));
  REMAT_CHECK(std::isfinite(finite_total),
              "min_cut: the finite capacities add up to more than a double holds");
  const double scale =
      finite_total > 0 ? std::ldexp(1.0, kFiniteTotalBits - 1 - std::ilogb(finite_total)) : 0;
  IntegerFlowNetwork net(vertices_);
  for (const Edge& e : edges_)
    net.add_edge(e.from, e.to,
                 std::isinf(e.capacity) ? kScaledInfinite : std::llround(e.capacity * scale));
  const int64_t flow = net.max_flow(source, sink, MaxFlowAlgorithm::kBoykovKolmogorov);
  REMAT_CHECK(flow < kScaledInfinite, "min_cut: every cut crosses an infinite edge");
  return net.reached_from(source);
}

}  // namespace remat::min_cut
