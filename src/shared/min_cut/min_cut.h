// min_cut.h — a minimum s-t cut of a directed network, for solvers that phrase a choice as a cut
// (what to keep and what to recompute). Boost.Graph's max flow runs underneath.
// MinCutNetwork takes real capacities and scales them to int64, so a cut is exact to about twelve
// significant digits of the finite capacities' total (an edge far below that total counts as
// free); an infinite edge is never cut. IntegerFlowNetwork is the layer below, for a caller that
// scales its own capacities and wants the flow, either algorithm and either side of the cut.
//   MinCutNetwork net(4);
//   net.add_edge(0, 1, 2.5);
//   net.add_edge(1, 3, MinCutNetwork::kInfinite);
//   const std::vector<bool> side = net.source_side(0, 3);  // side[v]: v is with the source
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace remat::min_cut {

enum class MaxFlowAlgorithm { kBoykovKolmogorov, kPushRelabel };

// A flow network on int64 capacities; edges keep the order they were added in, so the same
// network and algorithm give the same flow.
class IntegerFlowNetwork {
 public:
  explicit IntegerFlowNetwork(int32_t vertices);
  ~IntegerFlowNetwork();
  IntegerFlowNetwork(IntegerFlowNetwork&&) noexcept;
  IntegerFlowNetwork& operator=(IntegerFlowNetwork&&) noexcept;

  void add_edge(int32_t from, int32_t to, int64_t capacity);  // capacity >= 0

  // The value of a maximum flow; the residual network stays for the queries below. The caller
  // keeps the flow within int64 (Boost's algorithms do not check).
  int64_t max_flow(int32_t source, int32_t sink, MaxFlowAlgorithm algorithm);

  // After max_flow: the vertices `source` reaches in the residual network (the smallest source
  // side of a minimum cut), and those that reach `sink` (the complement of the largest one).
  std::vector<bool> reached_from(int32_t source) const;
  std::vector<bool> reaching(int32_t sink) const;

 private:
  struct Storage;  // the Boost graph, kept out of this header
  std::unique_ptr<Storage> g_;
};

// A minimum cut on real capacities (Boykov-Kolmogorov underneath).
class MinCutNetwork {
 public:
  // A capacity no cut may cross.
  static constexpr double kInfinite = std::numeric_limits<double>::infinity();

  // Vertices 0 .. vertices-1.
  explicit MinCutNetwork(int32_t vertices);

  // An edge with `capacity` >= 0 (finite) or kInfinite; parallel edges add up.
  void add_edge(int32_t from, int32_t to, double capacity);

  // The source side of a minimum cut: the vertices reachable from `source` in the residual
  // network of a maximum flow, the smallest source side of any minimum cut of the scaled
  // capacities (so it does not depend on which maximum flow was found; capacities exact in binary
  // scale exactly). An internal error when every cut crosses an infinite edge.
  std::vector<bool> source_side(int32_t source, int32_t sink) const;

  int32_t num_vertices() const { return vertices_; }

 private:
  struct Edge {
    int32_t from, to;
    double capacity;
  };
  int32_t vertices_;
  std::vector<Edge> edges_;
};

}  // namespace remat::min_cut
