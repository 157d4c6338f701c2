// summary.h — rk-GB's blocks and classes of identical blocks (blocks.h) as plain figures, the
// public listing for `remat info --blocks` and Python (`_remat.rockmate_blocks`), which need
// neither rockmate nor the block structure's internals.
//   const BlocksSummary bs = describe_blocks(graph);  // UnsupportedGraph without chain structure
//   for (const BlockSummary& b : bs.blocks) ... b.stage, b.class_id, b.forward_nodes ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "remat/graph.h"

namespace remat::rockmate {

struct BlockSummary {
  int32_t stage = 1;
  int32_t class_id = 0;
  int32_t forward_nodes = 0, backward_nodes = 0;
  int64_t input_bytes = 0, output_bytes = 0, weight_bytes = 0;
  std::string first, last;     // names of its first and last forward node
  std::vector<int32_t> nodes;  // node indices: forward, then backward
};
struct ClassSummary {
  std::string hash;  // canonical hash, 16 hex digits
  std::vector<int32_t> members;
};
struct BlocksSummary {
  std::vector<BlockSummary> blocks;
  std::vector<ClassSummary> classes;
  std::string note;  // why one block holds most of a large forward (GraphChain::note), or empty
};
// Throws InputError (UnsupportedGraph) when the graph has no chain structure.
BlocksSummary describe_blocks(const Graph& graph);

}  // namespace remat::rockmate
