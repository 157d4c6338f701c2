// generate.h — synthetic problems for tests and benchmarks (`remat gen KIND`).
// Every generator is deterministic in its parameters and seed; parameters are documented in
// docs/formats.md (Generators).
//   Graph g = generate_random_layered({.num_nodes = 1000, .seed = 7});
#pragma once

#include <cstdint>

#include "remat/graph.h"

namespace remat {

// A layered random DAG in the style of the MOCCASIN data set: nodes are split into layers of
// random width; each node reads from the previous layer with probability `edge_density` (at least
// one edge) and from earlier layers with probability `skip_density`; sizes and durations are
// uniform in their ranges. Nodes with no users are graph outputs; there are no graph inputs.
struct RandomLayeredParams {
  int32_t num_nodes = 100;
  uint64_t seed = 1;
  double width = 0.3;          // mean layer width = max(1, width * sqrt(num_nodes) * 2)
  double edge_density = 0.2;   // probability of an edge to each node of the previous layer
  double skip_density = 0.14;  // probability of an edge to a node of an earlier layer (scaled)
  int32_t skip_window = 4;     // how many layers back a skip connection may reach
  int64_t min_size = 100;
  int64_t max_size = 5000;
  double min_cost = 1;
  double max_cost = 1000;
};
Graph generate_random_layered(const RandomLayeredParams& params);

}  // namespace remat
