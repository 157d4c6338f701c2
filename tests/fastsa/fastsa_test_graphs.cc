#include "fastsa_test_graphs.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "remat/random.h"

namespace remat::fastsa::testing {

Graph rich_random_graph(const RichGraphParams& p) {
  Rng rng(p.seed);
  GraphSpec spec;
  spec.name = fmt::format("rich_{}_{}", p.num_nodes, p.seed);
  std::vector<int32_t> available;
  for (int32_t i = 0; i < p.num_graph_inputs; ++i) {
    available.push_back(static_cast<int32_t>(spec.values.size()));
    spec.values.push_back({fmt::format("in{}", i), rng.between(1, 60), /*is_output=*/i == 1});
  }
  for (int32_t n = 0; n < p.num_nodes; ++n) {
    Node node;
    node.name = fmt::format("n{}", n);
    node.cost = static_cast<double>(rng.between(0, 10));
    node.temp_bytes = rng.below(3) == 0 ? rng.between(1, 40) : 0;
    node.recomputable = rng.uniform() >= p.non_recomputable;
    const auto num_inputs =
        std::min<int64_t>(rng.between(0, 3), static_cast<int64_t>(available.size()));
    for (int64_t k = 0; k < num_inputs; ++k) {
      // Mostly recent values, sometimes any earlier one (long-lived values, skips).
      const auto span = static_cast<int64_t>(available.size());
      const int64_t back = rng.below(4) == 0
                               ? rng.below(static_cast<uint64_t>(span))
                               : rng.below(static_cast<uint64_t>(std::min<int64_t>(span, 5)));
      node.inputs.push_back(ValueId{available[static_cast<size_t>(span - 1 - back)]});
    }
    const int64_t num_outputs = rng.below(5) == 0 ? rng.between(2, 3) : 1;
    for (int64_t k = 0; k < num_outputs; ++k) {
      const auto v = static_cast<int32_t>(spec.values.size());
      spec.values.push_back({fmt::format("v{}_{}", n, k), rng.between(0, 100),
                             /*is_output=*/rng.below(12) == 0 || n == p.num_nodes - 1});
      node.outputs.push_back(ValueId{v});
      available.push_back(v);
    }
    spec.nodes.push_back(std::move(node));
  }
  return Graph::build(std::move(spec), "rich-random");
}

Graph chain_training_graph(int32_t length, int64_t size) {
  GraphSpec spec;
  spec.name = fmt::format("chain_{}", length);
  auto value = [&](std::string name, bool is_output = false) {
    spec.values.push_back({std::move(name), size, is_output});
    return ValueId{static_cast<int32_t>(spec.values.size()) - 1};
  };
  std::vector<ValueId> a = {value("a0")};
  for (int32_t i = 1; i <= length; ++i) {
    a.push_back(value(fmt::format("a{}", i)));
    spec.nodes.push_back({.name = fmt::format("f{}", i),
                          .cost = 1,
                          .inputs = {a[static_cast<size_t>(i - 1)]},
                          .outputs = {a.back()}});
  }
  ValueId d = value(fmt::format("d{}", length));
  spec.nodes.push_back({.name = "loss", .cost = 1, .inputs = {a.back()}, .outputs = {d}});
  for (int32_t i = length; i >= 1; --i) {
    const ValueId next = value(fmt::format("d{}", i - 1), /*is_output=*/i == 1);
    spec.nodes.push_back({.name = fmt::format("b{}", i),
                          .cost = 1,
                          .inputs = {a[static_cast<size_t>(i - 1)], d},
                          .outputs = {next}});
    d = next;
  }
  return Graph::build(std::move(spec), "chain");
}

}  // namespace remat::fastsa::testing
