// blocks.h — rk-GB on a traced joint graph (Rockmate §3.2, App. A; specs §4.2–4.3): the graph cut
// at its forward separators into a sequence of blocks, and the classes of identical blocks.
// The blocks are the stages of extract_chain() with gradient sums placed late (lower.h), so the
// sum of a layer input's gradients belongs to the layer that reads it and identical layers get
// identical blocks, the last one included. Two blocks are identical when their canonical forms
// are equal: nodes in local order (forward then backward, graph order) with op, kind, phase,
// recomputability, cost, temp, output sizes, and inputs named by local position (a value of the
// block) or by first-read order outside it (activation, gradient, or graph input, with size).
// Names do not count. Each class is solved once (rk-Checkmate) and its options shared.
//   const BlockStructure bs = build_blocks(graph);
//   for (const Block& b : bs.blocks) ... bs.classes[b.class_id].canonical_hash ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "remat/graph.h"
#include "remat/lower.h"

namespace remat::rockmate {

struct Block {
  int32_t stage = 1;             // the chain stage it is (1..L+1; L+1 holds the loss)
  std::vector<NodeId> nodes;     // local order: forward nodes, then backward nodes (graph order)
  int32_t num_forward = 0;       // nodes[0 .. num_forward) are the forward ones
  std::vector<ValueId> inputs;   // read here, produced by another block (activations, gradients)
  std::vector<ValueId> outputs;  // produced here, read by another block or a graph output
  std::vector<ValueId> weights;  // graph inputs read here (parameters, data)
  int32_t class_id = 0;
};

struct BlockClass {
  uint64_t canonical_hash = 0;   // FNV-1a of the canonical form
  std::vector<int32_t> members;  // block indices, ascending
};

struct BlockStructure {
  GraphChain chain;  // stage ℓ is blocks[ℓ - 1]
  std::vector<Block> blocks;
  std::vector<BlockClass> classes;  // in order of first member
};

// Throws UnsupportedGraph (an InputError) as extract_chain() does when the graph has no chain.
BlockStructure build_blocks(const Graph& graph, int32_t max_stages = 100);

// The canonical form of a block (equal forms: identical blocks, up to renaming).
std::string canonical_form(const Graph& graph, const Block& block);

}  // namespace remat::rockmate
