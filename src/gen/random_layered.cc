#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <span>

#include "remat/error.h"
#include "remat/generate.h"
#include "remat/random.h"

namespace remat {
namespace {

void check_params(const RandomLayeredParams& p) {
  if (p.num_nodes < 1 || p.num_nodes > kMaxGeneratedNodes)
    throw InputError(fmt::format("random-layered: --nodes must be in [1, {}] (got {})",
                                 kMaxGeneratedNodes, p.num_nodes));
  if (!(p.width > 0))
    throw InputError(fmt::format("random-layered: --width must be > 0 (got {})", p.width));
  for (double d : {p.edge_density, p.skip_density})
    if (!(d >= 0 && d <= 1))
      throw InputError(fmt::format("random-layered: densities must be in [0, 1] (got {})", d));
  if (p.skip_window < 0)
    throw InputError("random-layered: --skip-window must be >= 0 (0: every earlier layer)");
  const double nodes = p.num_nodes;
  const double layer_width = std::min(nodes, std::max(1.0, p.width * std::sqrt(nodes) * 2));
  const double expected_edges = nodes * layer_width * (p.edge_density + p.skip_density);
  if (expected_edges > kMaxGeneratedEdges)
    throw InputError(fmt::format(
        "random-layered: about {:.3g} edges expected (--nodes {}, --width {}, densities {} and "
        "{}); the limit is {:.3g}: lower the width or the densities",
        expected_edges, p.num_nodes, p.width, p.edge_density, p.skip_density, kMaxGeneratedEdges));
  if (p.min_size < 0 || p.max_size < p.min_size)
    throw InputError(fmt::format("random-layered: need 0 <= min size <= max size (got {}, {})",
                                 p.min_size, p.max_size));
  if (!(p.min_cost >= 0) || !(p.max_cost >= p.min_cost))
    throw InputError(fmt::format("random-layered: need 0 <= min cost <= max cost (got {}, {})",
                                 p.min_cost, p.max_cost));
}

// Layer sizes summing to num_nodes, each around the mean width, between one source node and
// one sink node (as in the MOCCASIN data set's graphs).
std::vector<int32_t> layer_widths(const RandomLayeredParams& p, Rng& rng) {
  const double mean = std::max(1.0, p.width * std::sqrt(static_cast<double>(p.num_nodes)) * 2.0);
  std::vector<int32_t> widths = {1};
  const int32_t inner_end = p.num_nodes > 1 ? p.num_nodes - 1 : 1;
  int32_t placed = 1;
  while (placed < inner_end) {
    const auto hi = static_cast<int64_t>(std::max(1.0, std::round(mean * 1.5)));
    const auto w = static_cast<int32_t>(std::min<int64_t>(rng.between(1, hi), inner_end - placed));
    widths.push_back(w);
    placed += w;
  }
  if (p.num_nodes > 1) widths.push_back(1);
  return widths;
}

// Calls take(u) for each u in [begin, end) with probability p each, independently: it draws the
// gaps between the chosen ones (geometric), so the work is linear in the edges made, not in the
// candidates (a skip edge may come from any earlier node: per candidate that is quadratic).
template <class Take>
void sample_each(int32_t begin, int32_t end, double p, Rng& rng, Take take) {
  if (!(p > 0) || begin >= end) return;
  if (p >= 1) {
    for (int32_t u = begin; u < end; ++u) take(u);
    return;
  }
  const double log_miss = std::log1p(-p);
  for (int64_t u = begin;;) {
    // P(gap = k) = (1 - p)^k p; a gap beyond the range ends the loop (also when it is huge).
    const double gap = std::floor(std::log1p(-rng.uniform()) / log_miss);
    if (!(gap < static_cast<double>(end - u))) return;
    u += static_cast<int64_t>(gap);
    take(static_cast<int32_t>(u));
    ++u;
  }
}

// Every node but the sink feeds at least one node of the next layer, as in the MOCCASIN data
// set's graphs: a value nobody reads would be a graph output, resident to the end (the earlier
// generator left 15-47 of them in graphs of 1,000-6,000 nodes).
void feed_next_layer(std::span<const int32_t> layer_start, std::vector<Node>& nodes, Rng& rng) {
  for (size_t layer = 0; layer + 2 < layer_start.size(); ++layer) {
    const int32_t next_begin = layer_start[layer + 1], next_end = layer_start[layer + 2];
    std::vector<bool> feeds_next(static_cast<size_t>(next_begin - layer_start[layer]), false);
    for (int32_t n = next_begin; n < next_end; ++n)
      for (ValueId v : nodes[static_cast<size_t>(n)].inputs)
        if (v.value() >= layer_start[layer] && v.value() < next_begin)
          feeds_next[static_cast<size_t>(v.value() - layer_start[layer])] = true;
    for (int32_t u = layer_start[layer]; u < next_begin; ++u) {
      if (feeds_next[static_cast<size_t>(u - layer_start[layer])]) continue;
      const auto reader = next_begin + static_cast<int32_t>(
                                           rng.below(static_cast<uint64_t>(next_end - next_begin)));
      nodes[static_cast<size_t>(reader)].inputs.push_back(ValueId{u});
    }
  }
}

}  // namespace

Graph generate_random_layered(const RandomLayeredParams& p) {
  check_params(p);
  Rng rng(p.seed);
  const std::vector<int32_t> widths = layer_widths(p, rng);
  std::vector<int32_t> layer_start = {0};
  for (int32_t w : widths) layer_start.push_back(layer_start.back() + w);

  GraphSpec spec;
  spec.name = fmt::format("random_layered_n{}_s{}", p.num_nodes, p.seed);
  for (size_t layer = 0; layer < widths.size(); ++layer) {
    for (int32_t n = layer_start[layer]; n < layer_start[layer + 1]; ++n) {
      Node node;
      node.name = std::to_string(n);
      node.cost = std::round(p.min_cost + (p.max_cost - p.min_cost) * rng.uniform());
      node.outputs = {ValueId{n}};
      if (layer > 0) {
        const int32_t prev_begin = layer_start[layer - 1], prev_end = layer_start[layer];
        auto read = [&node](int32_t u) { node.inputs.push_back(ValueId{u}); };
        sample_each(prev_begin, prev_end, p.edge_density, rng, read);
        if (node.inputs.empty())
          node.inputs.push_back(ValueId{
              prev_begin +
              static_cast<int32_t>(rng.below(static_cast<uint64_t>(prev_end - prev_begin)))});
        // Skip edges from the window's layers before the previous one, skip_density spread
        // over the window; with no window (0), over every layer of the graph: each earlier node
        // equally likely, as the spans of the MOCCASIN data set's skip edges are.
        const size_t window = p.skip_window == 0 ? layer : static_cast<size_t>(p.skip_window);
        const size_t oldest = layer >= window + 1 ? layer - window - 1 : 0;
        const double skip_p =
            p.skip_density / static_cast<double>(p.skip_window == 0 ? widths.size() : window);
        sample_each(layer_start[oldest], prev_begin, skip_p, rng, read);
      }
      spec.nodes.push_back(std::move(node));
      spec.values.push_back(
          Value{.name = std::to_string(n), .size_bytes = rng.between(p.min_size, p.max_size)});
    }
  }
  feed_next_layer(layer_start, spec.nodes, rng);
  spec.values.back().is_output = true;  // the sink
  return Graph::build(std::move(spec), "random-layered");
}

}  // namespace remat
