// decode.h — internal to checkmate_model: the R-from-S pass that turns a retention into a
// sequence with the stage of each position, shared by the formulation and the retention searches.
#pragma once
#include <cstdint>
#include <vector>

#include "checkmate_model/formulation.h"
#include "remat/graph.h"
#include "remat/plan.h"

namespace remat::checkmate {

// Whether `v` takes memory the model counts (graph inputs are outside it).
inline bool has_memory(const Graph& g, ValueId v) {
  return !g.is_graph_input(v) && g.value(v).size_bytes > 0;
}

struct Decoded {
  Sequence sequence;
  std::vector<int32_t> stage_of;  // stage of each position
};

// Each stage t runs node t and, before it, every node whose outputs stage t or t + 1 needs and
// does not hold.
Decoded decode(const Graph& g, const Retention& held);

}  // namespace remat::checkmate
