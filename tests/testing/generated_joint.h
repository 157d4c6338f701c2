// generated_joint.h — the small generated joint training graph the solver property tests share:
// `remat gen joint`'s generator with narrow layers, so a graph of a hundred nodes has many rows.
//   const Graph g = testing::generated_joint(120, /*seed=*/3);
// Header-only: only the test binaries that include it link the generator.
#pragma once

#include <cstdint>

#include "remat/generate.h"
#include "remat/graph.h"

namespace remat::testing {

inline Graph generated_joint(int32_t nodes, uint64_t seed) {
  return generate_joint(
      {.num_nodes = nodes, .seed = seed, .rows = 16, .min_width = 4, .max_width = 64});
}

}  // namespace remat::testing
