// rk-Checkmate options per class of identical blocks (options.h).
#include "options.h"

namespace remat::rockmate {
namespace {

LocalOption keep_all(const Block& b) {
  LocalOption o;
  for (int32_t i = 0; i < static_cast<int32_t>(b.nodes.size()); ++i)
    (i < b.num_forward ? o.forward : o.backward).push_back(i);
  return o;
}

// The forward again (recomputable nodes) right before the backward: nothing kept but a^ℓ.
LocalOption keep_nothing(const Graph& g, const Block& b) {
  LocalOption o;
  for (int32_t i = 0; i < b.num_forward; ++i) {
    o.forward.push_back(i);
    if (g.node(b.nodes[static_cast<size_t>(i)]).recomputable) o.backward.push_back(i);
  }
  for (int32_t i = b.num_forward; i < static_cast<int32_t>(b.nodes.size()); ++i)
    o.backward.push_back(i);
  return o;
}

}  // namespace

std::vector<std::vector<LocalOption>> class_options(const Graph& graph, const BlockStructure& bs,
                                                    const OptionParams& params,
                                                    const Deadline& deadline, OptionStats& stats) {
  (void)params;
  (void)deadline;
  std::vector<std::vector<LocalOption>> out(bs.classes.size());
  stats.runs_per_class.assign(bs.classes.size(), 0);
  for (size_t c = 0; c < bs.classes.size(); ++c) {
    const Block& rep = bs.blocks[static_cast<size_t>(bs.classes[c].members.front())];
    out[c] = {keep_all(rep), keep_nothing(graph, rep)};
  }
  return out;
}

}  // namespace remat::rockmate
