#include <fmt/format.h>
#include <gtest/gtest.h>

#include "remat/error.h"
#include "remat/io.h"
#include "testing/testing.h"

namespace remat {
namespace {

TEST(ChainJson, RoundTrip) {
  Chain chain;
  chain.name = "toy";
  chain.input = {8'000'000, 8'000'000, 8'000'000};
  chain.stages = {{"fc1", 1.6, 3.05, {10'000'000, 10'000'000, 10'000'000}, 0, 20'000'000},
                  {"loss", 0, 0, {0, 0, 0}, 0, 0}};
  const Chain again = parse_chain_json(chain_to_json(chain), "toy.json");
  EXPECT_EQ(again.name, "toy");
  EXPECT_EQ(again.length(), 1);
  EXPECT_EQ(again.input.a, 8'000'000);
  EXPECT_EQ(again.stages[0].name, "fc1");
  EXPECT_DOUBLE_EQ(again.stages[0].u_b, 3.05);
  EXPECT_EQ(again.stages[0].o_b, 20'000'000);
  EXPECT_EQ(chain_to_json(chain), chain_to_json(again));
}

TEST(ChainJson, DefaultsAndErrors) {
  const Chain c = parse_chain_json(R"({"format": "remat-chain", "version": 1, "input": {"a": 4},
      "stages": [{"u_f": 1, "a": 2}, {"a": 0}]})",
                                   "c.json");
  EXPECT_EQ(c.input.abar, 4);
  EXPECT_EQ(c.input.delta, 4);
  EXPECT_EQ(c.stages[0].name, "F1");
  EXPECT_EQ(testing::input_error_of([] {
              parse_chain_json(R"({"format": "remat-chain", "version": 1, "input": {"a": 4},
      "stages": [{"u_f": -1, "a": 2}, {"a": 0}]})",
                               "c.json");
            }),
            "c.json: stage 1: field 'u_f' is negative (-1)");
}

TEST(PlanJson, RoundTripAndMismatch) {
  const Graph g = testing::graph_from_json(R"({"format": "remat-graph", "version": 1,
    "values": [{"id": 0, "name": "a", "size": 10}, {"id": 1, "name": "b", "size": 5, "output": true}],
    "nodes": [{"id": 0, "name": "f", "cost": 1, "outputs": [0]},
              {"id": 1, "name": "g", "cost": 1, "inputs": [0], "outputs": [1]}]})");
  SolveOptions options;
  options.budget = {100};
  const SolveResult r = solve(g, "none", options);
  const std::string text = plan_to_json(g, r, options.budget);
  const Plan p = parse_plan_json(g, text, "plan.json");
  EXPECT_EQ(p.sequence, r.plan.sequence);
  EXPECT_EQ(p.solver, "none");
  const Graph other = testing::graph_from_json(R"({"format": "remat-graph", "version": 1,
    "values": [{"id": 0, "name": "a", "size": 10}, {"id": 1, "name": "b", "size": 5, "output": true}],
    "nodes": [{"id": 0, "name": "p", "cost": 1, "outputs": [0]},
              {"id": 1, "name": "q", "cost": 1, "inputs": [0], "outputs": [1]}]})");
  EXPECT_EQ(testing::input_error_of([&] { parse_plan_json(other, text, "plan.json"); }),
            fmt::format("plan.json: the plan was made for another graph (fingerprint {}); this "
                        "graph has fingerprint {}: plan it again for this graph",
                        graph_fingerprint(g), graph_fingerprint(other)));
  // Plans written before fingerprints existed still have their step names checked.
  std::string unfingerprinted = text;
  const size_t at = unfingerprinted.find("\"graph_fingerprint\"");
  ASSERT_NE(at, std::string::npos);
  unfingerprinted.erase(at, unfingerprinted.find('\n', at) - at + 1);
  EXPECT_EQ(testing::input_error_of([&] { parse_plan_json(other, unfingerprinted, "plan.json"); }),
            "plan.json: step 0: node 0 is 'p' in the graph but 'f' in the plan (was "
            "the plan made for another graph?)");
}

}  // namespace
}  // namespace remat
