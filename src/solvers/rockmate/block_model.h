// block_model.h — internal to rockmate: a block as a small graph for the options MILP, and the
// way back from a sequence of that graph to an option (positions in Block::nodes).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "blocks/blocks.h"
#include "options.h"
#include "remat/graph.h"
#include "remat/plan.h"

namespace remat::rockmate {

// Every node once, everything the backward reads kept.
LocalOption keep_all(const Block& b);
// The forward again (recomputable nodes) right before the backward: nothing kept but a^ℓ.
LocalOption keep_nothing(const Graph& g, const Block& b);

// The block as a graph for the MILP, and the way back to block positions.
struct BlockModel {
  std::optional<Graph> graph;
  IdVector<NodeId, int32_t> position;  // sub-graph node -> position in Block::nodes (-1: the loss)
  int32_t loss = 0;                    // sub-graph node index of the loss placeholder
  std::vector<int32_t> dropped;  // block positions of the views left out (replayed at lowering)
  int64_t loss_floor = 0;        // least memory at the loss: inputs, what it reads and produces
  int64_t save_low = 0;          // lowest M_save of the grid (set with the grid)
};

BlockModel block_model(const Graph& g, const Block& b);

// A sub-graph sequence as an option: split at the loss, mapped to block positions, with the views
// left out replayed right before a use whenever what they view was produced since they last ran.
LocalOption to_option(const Graph& g, const Block& b, const BlockModel& bm, const Sequence& seq);

}  // namespace remat::rockmate
