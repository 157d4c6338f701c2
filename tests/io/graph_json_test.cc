#include <gtest/gtest.h>

#include <variant>

#include "remat/error.h"
#include "remat/generate.h"
#include "remat/io.h"
#include "remat/simulate.h"
#include "testing/testing.h"

namespace remat {
namespace {

std::string parse_error(std::string_view text) {
  return testing::input_error_of([&] { parse_graph_json(text, "g.json"); });
}

void expect_same_graph(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  ASSERT_EQ(a.num_values(), b.num_values());
  EXPECT_EQ(a.name(), b.name());
  for (int32_t v = 0; v < a.num_values(); ++v) {
    const Value &x = a.value(ValueId{v}), &y = b.value(ValueId{v});
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.size_bytes, y.size_bytes);
    EXPECT_EQ(x.is_output, y.is_output);
    EXPECT_EQ(x.alias_of, y.alias_of);
  }
  for (int32_t n = 0; n < a.num_nodes(); ++n) {
    const Node &x = a.node(NodeId{n}), &y = b.node(NodeId{n});
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.op, y.op);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.phase, y.phase);
    EXPECT_EQ(x.cost, y.cost);
    EXPECT_EQ(x.temp_bytes, y.temp_bytes);
    EXPECT_EQ(x.recomputable, y.recomputable);
    EXPECT_EQ(x.inputs, y.inputs);
    EXPECT_EQ(x.outputs, y.outputs);
  }
}

constexpr std::string_view kSmall = R"({"format": "remat-graph", "version": 1, "name": "small",
  "values": [{"id": 0, "name": "x", "size": 8},
             {"id": 1, "name": "a", "size": 16},
             {"id": 2, "name": "a_view", "size": 0, "alias_of": 1},
             {"id": 3, "name": "y", "size": 4, "output": true}],
  "nodes": [{"id": 0, "name": "mm", "op": "aten.mm", "kind": "compute", "phase": "forward",
             "cost": 2.5, "temp": 3, "inputs": [0], "outputs": [1]},
            {"id": 1, "name": "view", "op": "aten.view", "kind": "view", "cost": 0,
             "inputs": [1], "outputs": [2]},
            {"id": 2, "name": "drop", "op": "aten.dropout", "kind": "random", "phase": "backward",
             "cost": 1, "recomputable": false, "inputs": [2], "outputs": [3]}]})";

TEST(GraphJson, ReadsEveryField) {
  const Graph g = parse_graph_json(kSmall, "small.json");
  EXPECT_EQ(g.name(), "small");
  const Node& mm = g.node(NodeId{0});
  EXPECT_EQ(mm.op, "aten.mm");
  EXPECT_EQ(mm.kind, OpKind::kCompute);
  EXPECT_EQ(mm.phase, Phase::kForward);
  EXPECT_DOUBLE_EQ(mm.cost, 2.5);
  EXPECT_EQ(mm.temp_bytes, 3);
  const Node& drop = g.node(NodeId{2});
  EXPECT_FALSE(drop.recomputable);
  EXPECT_EQ(drop.kind, OpKind::kRandom);
  // The alias rewrite: drop reads a_view and its root a.
  EXPECT_EQ(drop.inputs, (std::vector<ValueId>{ValueId{2}, ValueId{1}}));
  EXPECT_EQ(g.value(ValueId{2}).alias_of, ValueId{1});
}

TEST(GraphJson, RoundTripKeepsGraphAndSimulation) {
  for (const Graph& g : {parse_graph_json(kSmall, "small.json"),
                         generate_random_layered({.num_nodes = 300, .seed = 3})}) {
    const Graph again = parse_graph_json(graph_to_json(g), "again.json");
    expect_same_graph(g, again);
    const Evaluation a = simulate(g, default_schedule(g), {.timeline = true});
    const Evaluation b = simulate(again, default_schedule(again), {.timeline = true});
    EXPECT_EQ(a.timeline, b.timeline);
    EXPECT_EQ(a.cost, b.cost);
    EXPECT_EQ(graph_to_json(g), graph_to_json(again));
  }
}

TEST(GraphJson, StreamedAndTreeReadsGiveTheSameGraph) {
  // remat writes "format" first, so its files are streamed item by item (GraphStream); with
  // "format" last the whole document tree is read. Both give the same graph and the same errors.
  const Graph g = generate_random_layered({.num_nodes = 200, .seed = 4});
  const std::string streamed = graph_to_json(g);
  ASSERT_LT(streamed.find("\"format\""), streamed.find("\"nodes\""));
  std::string tree = streamed;
  const size_t format_at = tree.find("\"format\"");
  const size_t line_end = tree.find('\n', format_at);
  const std::string format_line = tree.substr(format_at, line_end - format_at);
  tree.erase(format_at, line_end - format_at + 1);
  tree.insert(tree.rfind('}'), ", " + format_line.substr(0, format_line.rfind(',')) + "\n");
  expect_same_graph(parse_graph_json(streamed, "s.json"), parse_graph_json(tree, "t.json"));
  expect_same_graph(std::get<Graph>(parse_graph_or_chain(streamed, "s.json")), g);

  const std::string bad_node = R"({"format": "remat-graph", "version": 1, "values": [],
    "nodes": [{"id": 0, "cost": "x"}]})";
  EXPECT_EQ(parse_error(bad_node), "g.json: node 0: field 'cost' must be a number (got \"x\")");
  const std::string twice = R"({"format": "remat-graph", "version": 1, "values": [],
    "nodes": [], "nodes": []})";
  EXPECT_EQ(parse_error(twice), "g.json: the document has field 'nodes' twice");
}

TEST(GraphJson, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(parse_error("{\n  \"format\": \"remat-graph\",\n  oops\n}"),
            "g.json:3:3: invalid JSON: syntax error while parsing object key - invalid literal; "
            "last read: '\"remat-graph\",<U+000A>  o'; expected string literal");
}

TEST(GraphJson, ContentErrorsNameTheId) {
  EXPECT_EQ(
      parse_error(
          R"({"format": "remat-graph", "version": 1, "values": [{"id": 1, "size": 1}], "nodes": []})"),
      "g.json: value at index 0 has id 1: value ids must be dense and in order (0, 1, 2, ...)");
  EXPECT_EQ(
      parse_error(
          R"({"format": "remat-graph", "version": 1, "values": [{"id": 0, "size": "big"}], "nodes": []})"),
      "g.json: value 0: field 'size' must be an integer (got \"big\")");
  EXPECT_EQ(parse_error(R"({"format": "remat-graph", "version": 1, "values": [{"id": 0, "size": 1}],
      "nodes": [{"id": 0, "cost": 1, "kind": "magic", "outputs": [0]}]})"),
            "g.json: node 0: field 'kind' is 'magic' (known: compute, pointwise, reduction, view, "
            "random, other)");
  EXPECT_EQ(parse_error(R"({"format": "remat-graph", "version": 1, "values": [{"id": 0, "size": 1}],
      "nodes": [{"id": 0, "outputs": [0]}]})"),
            "g.json: node 0: field 'cost' is missing");
  EXPECT_EQ(parse_error(R"({"format": "remat-graph", "version": 2, "values": [], "nodes": []})"),
            "g.json: unsupported remat-graph version 2 (this remat reads version 1)");
  EXPECT_EQ(parse_error(R"([1, 2])"), "g.json: the document must be a JSON object");
}

}  // namespace
}  // namespace remat
