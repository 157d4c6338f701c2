// Graph validation: every kind of bad input is rejected with a message naming the offender.
#include "remat/graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "remat/error.h"
#include "testing/testing.h"

namespace remat {
namespace {

using testing::graph_from_json;

// Two-node chain x -> a -> b; tests edit one field to make it invalid.
GraphSpec chain_spec() {
  GraphSpec spec;
  spec.name = "chain";
  spec.values = {{"x", 8}, {"a", 16}, {"b", 4, /*is_output=*/true}};
  spec.nodes = {{.name = "f", .cost = 1, .inputs = {ValueId{0}}, .outputs = {ValueId{1}}},
                {.name = "g", .cost = 2, .inputs = {ValueId{1}}, .outputs = {ValueId{2}}}};
  return spec;
}

std::string build_error(GraphSpec spec) {
  return testing::input_error_of([&] { Graph::build(std::move(spec), "test.json"); });
}

TEST(Graph, BuildsAndIndexes) {
  const Graph g = Graph::build(chain_spec(), "test");
  EXPECT_EQ(g.num_nodes(), 2);
  EXPECT_EQ(g.num_values(), 3);
  ASSERT_EQ(g.graph_inputs().size(), 1u);
  EXPECT_EQ(g.graph_inputs()[0], ValueId{0});
  ASSERT_EQ(g.graph_outputs().size(), 1u);
  EXPECT_EQ(g.graph_outputs()[0], ValueId{2});
  EXPECT_EQ(g.producer(ValueId{1}), NodeId{0});
  EXPECT_FALSE(g.producer(ValueId{0}).valid());
  ASSERT_EQ(g.users(ValueId{1}).size(), 1u);
  EXPECT_EQ(g.users(ValueId{1})[0], NodeId{1});
  EXPECT_EQ(g.find_node("g"), NodeId{1});
  EXPECT_EQ(g.find_value("a"), ValueId{1});
  EXPECT_FALSE(g.find_node("nope").has_value());
}

TEST(Graph, RejectsNegativeSize) {
  GraphSpec spec = chain_spec();
  spec.values[1].size_bytes = -5;
  EXPECT_EQ(build_error(spec), "test.json: value 1 ('a') has negative size -5");
}

TEST(Graph, RejectsNonFiniteOrNegativeCost) {
  GraphSpec spec = chain_spec();
  spec.nodes[1].cost = std::numeric_limits<double>::infinity();
  EXPECT_NE(build_error(spec).find("node 1 ('g') has invalid cost inf"), std::string::npos);
  spec.nodes[1].cost = -1;
  EXPECT_NE(build_error(spec).find("node 1 ('g') has invalid cost -1"), std::string::npos);
  spec.nodes[1].cost = std::nan("");
  EXPECT_NE(build_error(spec).find("has invalid cost"), std::string::npos);
}

TEST(Graph, RejectsTwoProducers) {
  GraphSpec spec = chain_spec();
  spec.nodes[1].outputs = {ValueId{1}};
  EXPECT_EQ(build_error(spec),
            "test.json: value 1 ('a') has two producers: node 0 ('f') and node 1 ('g')");
}

TEST(Graph, RejectsUseBeforeDefinition) {
  GraphSpec spec = chain_spec();
  std::swap(spec.nodes[0], spec.nodes[1]);
  EXPECT_NE(build_error(spec).find("node 0 ('g') reads value 1 ('a') before its producer node 1 "
                                   "('f') runs"),
            std::string::npos);
}

TEST(Graph, RejectsCycle) {
  GraphSpec spec = chain_spec();
  spec.nodes[0].inputs.push_back(ValueId{2});  // f reads g's output: f -> g -> f
  const std::string error = build_error(spec);
  EXPECT_NE(error.find("the graph has a cycle"), std::string::npos) << error;
  EXPECT_NE(error.find("'f'"), std::string::npos) << error;
  EXPECT_NE(error.find("'g'"), std::string::npos) << error;
}

TEST(Graph, RejectsMissingValueIds) {
  GraphSpec spec = chain_spec();
  spec.nodes[1].inputs = {ValueId{9}};
  EXPECT_EQ(build_error(spec), "test.json: node 1 ('g') has input value 9, which does not exist");
}

TEST(Graph, RejectsAliasOfMissingValue) {
  GraphSpec spec = chain_spec();
  spec.values.push_back({"view", 0});
  spec.values.back().alias_of = ValueId{42};
  EXPECT_EQ(build_error(spec),
            "test.json: value 3 ('view') is an alias of value 42, which does not exist");
}

TEST(Graph, RejectsSizedAliasAndAliasCycle) {
  GraphSpec spec = chain_spec();
  spec.values.push_back({"view", 4});
  spec.values.back().alias_of = ValueId{1};
  EXPECT_NE(build_error(spec).find("must have size 0"), std::string::npos);
  spec = chain_spec();
  spec.values.push_back({"v1", 0});
  spec.values.push_back({"v2", 0});
  spec.values[3].alias_of = ValueId{4};
  spec.values[4].alias_of = ValueId{3};
  EXPECT_NE(build_error(spec).find("cycle of aliases"), std::string::npos);
}

TEST(Graph, RejectsDuplicateNamesAndEmptyGraph) {
  GraphSpec spec = chain_spec();
  spec.nodes[1].name = "f";
  EXPECT_EQ(build_error(spec), "test.json: nodes 0 and 1 have the same name 'f'");
  spec = chain_spec();
  spec.nodes.clear();
  EXPECT_EQ(build_error(spec), "test.json: the graph has no nodes");
}

TEST(Graph, RejectsNodeReadingItsOwnOutput) {
  GraphSpec spec = chain_spec();
  spec.nodes[1].inputs.push_back(ValueId{2});
  EXPECT_NE(build_error(spec).find("node 1 ('g') reads its own output"), std::string::npos);
}

TEST(Graph, AliasUsersAlsoReadTheRoot) {
  // x -> f -> a; view = alias of a produced by v; h reads only the view.
  GraphSpec spec;
  spec.values = {{"x", 8}, {"a", 16}, {"view", 0}, {"out", 4, true}};
  spec.values[2].alias_of = ValueId{1};
  spec.nodes = {{.name = "f", .inputs = {ValueId{0}}, .outputs = {ValueId{1}}},
                {.name = "v", .inputs = {ValueId{1}}, .outputs = {ValueId{2}}},
                {.name = "h", .inputs = {ValueId{2}}, .outputs = {ValueId{3}}}};
  const Graph g = Graph::build(spec, "test");
  const auto& inputs = g.node(NodeId{2}).inputs;
  EXPECT_EQ(inputs, (std::vector<ValueId>{ValueId{2}, ValueId{1}}));
  // The rewrite is idempotent: building the built graph's spec again changes nothing.
  GraphSpec again{g.name(), g.values().raw(), g.nodes().raw()};
  const Graph g2 = Graph::build(again, "test");
  EXPECT_EQ(g2.node(NodeId{2}).inputs, inputs);
}

TEST(Graph, DuplicateInputsAreReadOnce) {
  GraphSpec spec = chain_spec();
  spec.nodes[1].inputs = {ValueId{1}, ValueId{1}};
  const Graph g = Graph::build(spec, "test");
  EXPECT_EQ(g.node(NodeId{1}).inputs.size(), 1u);
  EXPECT_EQ(g.users(ValueId{1}).size(), 1u);
}

}  // namespace
}  // namespace remat
