#include "min_cut/min_cut.h"

#include <fmt/format.h>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
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

void add_flow_edge(FlowGraph& g, Vertex from, Vertex to, int64_t capacity) {
  const auto forward = boost::add_edge(from, to, g).first;
  const auto backward = boost::add_edge(to, from, g).first;
  g[forward] = FlowEdge{capacity, 0, backward};
  g[backward] = FlowEdge{0, 0, forward};
}

std::vector<bool> reachable_in_residual(const FlowGraph& g, Vertex source) {
  std::vector<bool> seen(boost::num_vertices(g), false);
  std::vector<Vertex> stack = {source};
  seen[source] = true;
  while (!stack.empty()) {
    const Vertex u = stack.back();
    stack.pop_back();
    for (const auto& e : boost::make_iterator_range(boost::out_edges(u, g))) {
      const Vertex w = boost::target(e, g);
      if (g[e].residual > 0 && !seen[w]) {
        seen[w] = true;
        stack.push_back(w);
      }
    }
  }
  return seen;
}

}  // namespace

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
  FlowGraph g(static_cast<size_t>(vertices_));
  for (const Edge& e : edges_)
    add_flow_edge(g, static_cast<Vertex>(e.from), static_cast<Vertex>(e.to),
                  std::isinf(e.capacity) ? kScaledInfinite : std::llround(e.capacity * scale));
  const int64_t flow = boost::boykov_kolmogorov_max_flow(
      g, boost::get(&FlowEdge::capacity, g), boost::get(&FlowEdge::residual, g),
      boost::get(&FlowEdge::reverse, g), boost::get(boost::vertex_index, g),
      static_cast<Vertex>(source), static_cast<Vertex>(sink));
  REMAT_CHECK(flow < kScaledInfinite, "min_cut: every cut crosses an infinite edge");
  return reachable_in_residual(g, static_cast<Vertex>(source));
}

}  // namespace remat::min_cut
