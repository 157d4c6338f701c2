// rockmate.h — Rockmate (Zhao et al., ICML 2023) on joint training graphs: the public header.
// The graph is cut into blocks at its forward separators (rk-GB, blocks.h); each class of
// identical blocks gets a set of options, ways to run its forward and backward with some values
// recomputed, from the fixed-order MILP over a grid of (M_peak, M_save) budgets (rk-Checkmate,
// options.h); rk-Rotor, Rotor's persistent DP with one F_all/B case per option, picks the option
// and checkpoints of every block; the plan lowers to one graph sequence that the simulator
// judges. Parameters and figures: docs/solvers/rockmate.md.
//   SolveResult r = solve(graph, "rockmate", options);  // via the registry
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "remat/graph.h"
#include "remat/solver.h"

namespace remat::rockmate {

std::unique_ptr<Solver> make_rockmate();

// rk-GB's blocks and classes, for `remat info --blocks` and Python.
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
