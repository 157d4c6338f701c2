// libFuzzer target: remat-plan JSON, read against a fixed small graph (examples/rotor_toy.json is
// a chain, so the graph is built here) and then simulated.
#include "fuzz_common.h"
#include "remat/io.h"
#include "remat/simulate.h"

namespace {

const remat::Graph& fixed_graph() {
  static const remat::Graph graph = remat::parse_graph_json(R"({
    "format": "remat-graph", "version": 1, "name": "fuzz",
    "values": [{"id": 0, "name": "x", "size": 4}, {"id": 1, "name": "h", "size": 8},
               {"id": 2, "name": "y", "size": 4, "output": true}],
    "nodes": [{"id": 0, "name": "a", "cost": 1, "inputs": [0], "outputs": [1]},
              {"id": 1, "name": "b", "cost": 2, "inputs": [1], "outputs": [2]}]})",
                                                            "fixed");
  return graph;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const remat::Graph& g = fixed_graph();
  remat::fuzz::expect_value_or_input_error([&] {
    const remat::Plan plan = remat::parse_plan_json(g, remat::fuzz::as_text(data, size), "fuzz");
    (void)remat::simulate(g, plan.sequence);
  });
  return 0;
}
