// fastsa_test_graphs.h — graphs for the FastSA tests: random ones richer than
// generate_random_layered (multi-output nodes, temp, graph inputs and outputs, non-recomputable
// nodes, dead nodes) and the training graph of a sequential chain (Appendix C.1).
#pragma once

#include <cstdint>

#include "remat/graph.h"

namespace remat::fastsa::testing {

struct RichGraphParams {
  int32_t num_nodes = 30;
  uint64_t seed = 1;
  int32_t num_graph_inputs = 2;
  double non_recomputable = 0.1;  // probability per node
};
Graph rich_random_graph(const RichGraphParams& params);

// Forward f_i: a_{i-1} -> a_i, loss: a_L -> d_L, backward b_i: a_{i-1}, d_i -> d_{i-1}; a_0 is a
// graph input, d_0 the output; every value has `size` bytes and every node cost 1.
Graph chain_training_graph(int32_t length, int64_t size);

}  // namespace remat::fastsa::testing
