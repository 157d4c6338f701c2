// The block listing (summary.h).
#include "blocks/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "blocks/blocks.h"

namespace remat::rockmate {

BlocksSummary describe_blocks(const Graph& g) {
  const BlockStructure bs = build_blocks(g);
  BlocksSummary out;
  auto bytes = [&](std::span<const ValueId> vs) {
    int64_t sum = 0;
    for (ValueId v : vs) sum += g.value(v).size_bytes;
    return sum;
  };
  for (const Block& b : bs.blocks) {
    BlockSummary s;
    s.stage = b.stage;
    s.class_id = b.class_id;
    s.forward_nodes = b.num_forward;
    s.backward_nodes = static_cast<int32_t>(b.nodes.size()) - b.num_forward;
    s.input_bytes = bytes(b.inputs);
    s.output_bytes = bytes(b.outputs);
    s.weight_bytes = bytes(b.weights);
    s.first = g.node(b.nodes.front()).name;
    s.last = g.node(b.nodes[static_cast<size_t>(std::max(b.num_forward, 1)) - 1]).name;
    s.nodes = node_indices(b.nodes);
    out.blocks.push_back(std::move(s));
  }
  for (const BlockClass& c : bs.classes)
    out.classes.push_back({fmt::format("{:016x}", c.canonical_hash), c.members});
  out.note = bs.chain.note;
  return out;
}

}  // namespace remat::rockmate
