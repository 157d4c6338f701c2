// rk-GB: blocks from the chain's stages and classes of identical blocks (blocks.h).
#include "blocks.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

namespace remat::rockmate {
namespace {

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

std::string canonical_form(const Graph& g, const Block& block) {
  std::unordered_map<int32_t, int32_t> local;     // value -> position of its local production
  std::unordered_map<int32_t, int32_t> external;  // value -> first-read order outside the block
  std::string out;
  int32_t produced = 0;
  for (size_t i = 0; i < block.nodes.size(); ++i) {
    const Node& n = g.node(block.nodes[i]);
    fmt::format_to(std::back_inserter(out), "{}|{}|{}|{}|{:a}|{}|in", n.op, to_string(n.kind),
                   to_string(n.phase), n.recomputable ? 'r' : 'n', n.cost, n.temp_bytes);
    for (ValueId v : n.inputs) {
      if (auto it = local.find(v.value()); it != local.end()) {
        fmt::format_to(std::back_inserter(out), " L{}", it->second);
        continue;
      }
      auto [it, fresh] = external.emplace(v.value(), static_cast<int32_t>(external.size()));
      const char kind = g.is_graph_input(v)                              ? 'W'
                        : g.node(g.producer(v)).phase == Phase::kForward ? 'A'
                                                                         : 'G';
      fmt::format_to(std::back_inserter(out), " {}{}", kind, it->second);
      if (fresh) fmt::format_to(std::back_inserter(out), ":{}", g.value(v).size_bytes);
    }
    out += "|out";
    for (ValueId v : n.outputs) {
      local.emplace(v.value(), produced++);
      // Size-0 values (alias roots aside: effect-order tokens) do not count: they weigh nothing.
      const bool escapes =
          g.value(v).size_bytes > 0 &&
          std::find(block.outputs.begin(), block.outputs.end(), v) != block.outputs.end();
      fmt::format_to(std::back_inserter(out), " {}{}{}", g.value(v).size_bytes,
                     g.value(v).is_output ? "o" : "", escapes ? "x" : "");
    }
    out += '\n';
  }
  return out;
}

BlockStructure build_blocks(const Graph& g, int32_t max_stages) {
  BlockStructure bs;
  bs.chain = extract_chain(g, {.max_stages = max_stages, .floating_late = true});
  const GraphChain& gc = bs.chain;
  bs.blocks.resize(gc.stages.size());
  for (size_t i = 0; i < gc.stages.size(); ++i) {
    Block& b = bs.blocks[i];
    b.stage = static_cast<int32_t>(i) + 1;
    b.nodes = gc.stages[i].forward;
    b.num_forward = static_cast<int32_t>(b.nodes.size());
    b.nodes.insert(b.nodes.end(), gc.stages[i].backward.begin(), gc.stages[i].backward.end());
    IdVector<ValueId, uint8_t> seen(static_cast<size_t>(g.num_values()), 0);
    for (NodeId n : b.nodes) {
      for (ValueId v : g.node(n).inputs) {
        if (seen[v]) continue;
        const bool inside = !g.is_graph_input(v) && gc.stage_of[g.producer(v)] == b.stage;
        if (inside) continue;
        seen[v] = 1;
        (g.is_graph_input(v) ? b.weights : b.inputs).push_back(v);
      }
      for (ValueId v : g.node(n).outputs) {
        bool escapes = g.value(v).is_output;
        for (NodeId u : g.users(v)) escapes |= gc.stage_of[u] != b.stage;
        if (escapes) b.outputs.push_back(v);
      }
    }
  }
  std::map<std::string, int32_t> by_form;
  for (size_t i = 0; i < bs.blocks.size(); ++i) {
    std::string form = canonical_form(g, bs.blocks[i]);
    auto [it, fresh] = by_form.emplace(std::move(form), static_cast<int32_t>(bs.classes.size()));
    if (fresh) bs.classes.push_back({.canonical_hash = fnv1a(it->first), .members = {}});
    bs.blocks[i].class_id = it->second;
    bs.classes[static_cast<size_t>(it->second)].members.push_back(static_cast<int32_t>(i));
  }
  return bs;
}

}  // namespace remat::rockmate
