// min_cut.h — a minimum s-t cut of a small directed network with real capacities, for solvers
// that phrase a choice as a cut (what to keep and what to recompute). Boost.Graph's
// Boykov-Kolmogorov max flow runs underneath on capacities scaled to int64, so a cut is exact to
// about twelve significant digits of the finite capacities' total (an edge far below that total
// counts as free); an infinite edge is never cut.
//   MinCutNetwork net(4);
//   net.add_edge(0, 1, 2.5);
//   net.add_edge(1, 3, MinCutNetwork::kInfinite);
//   const std::vector<bool> side = net.source_side(0, 3);  // side[v]: v is with the source
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace remat::min_cut {

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
