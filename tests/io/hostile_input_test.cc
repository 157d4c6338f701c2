// Hostile input: each test is named after the behaviour it guards. The
// readers must refuse with one InputError naming the place, never crash or answer wrongly.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <set>
#include <string>

#include "remat/chain.h"
#include "remat/generate.h"
#include "remat/io.h"
#include "remat/registry.h"
#include "remat/simulate.h"
#include "testing/testing.h"

namespace remat {
namespace {

using testing::input_error_of;

std::string graph_with(const std::string& values, const std::string& nodes) {
  return R"({"format": "remat-graph", "version": 1, "values": [)" + values + R"(], "nodes": [)" +
         nodes + "]}";
}

TEST(HostileInput, DeepNestingIsRefusedBeforeRecursion) {
  const std::string deep =
      "{\"format\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  for (auto reader : {+[](std::string_view t) { (void)parse_graph_json(t, "deep.json"); },
                      +[](std::string_view t) { (void)import_networkx_json(t, "deep.json"); },
                      +[](std::string_view t) { (void)parse_chain_json(t, "deep.json"); },
                      +[](std::string_view t) { (void)detect_file_kind(t, "deep.json"); }}) {
    const std::string message = input_error_of([&] { reader(deep); });
    EXPECT_NE(message.find("deep.json:1:"), std::string::npos) << message;
    EXPECT_NE(message.find("nest deeper than 512"), std::string::npos) << message;
  }
  // Brackets inside strings do not count.
  const std::string in_string = graph_with(
      R"({"id": 0, "name": ")" + std::string(5000, '[') + R"(", "size": 1, "output": true})",
      R"({"id": 0, "cost": 1, "outputs": [0]})");
  EXPECT_EQ(input_error_of([&] { (void)parse_graph_json(in_string, "s.json"); }), "no error");
}

TEST(HostileInput, ErrorMessagesDescribeLargeValuesInsteadOfDumpingThem) {
  const std::string text =
      graph_with(R"({"id": 0, "size": )" + std::string(500, '[') + std::string(500, ']') + "}",
                 R"({"id": 0, "cost": 1, "outputs": [0]})");
  const std::string message = input_error_of([&] { (void)parse_graph_json(text, "g.json"); });
  EXPECT_NE(message.find("must be an integer (got an array of 1 items)"), std::string::npos)
      << message;
}

TEST(HostileInput, NumberBeyondDoubleRangeIsAnInputErrorWithLineAndColumn) {
  const std::string text = "{\"format\": \"remat-graph\",\n \"version\": 1e400}";
  const std::string message = input_error_of([&] { (void)parse_graph_json(text, "big.json"); });
  EXPECT_NE(message.find("big.json:2:13: invalid JSON: number out of range"), std::string::npos)
      << message;
  const std::string cli = input_error_of([&] { (void)detect_file_kind("[1, -2e999]", "x.json"); });
  EXPECT_NE(cli.find("x.json:1:5:"), std::string::npos) << cli;
}

TEST(HostileInput, TotalBytesAbove2To62AreRefusedSoSumsStayExact) {
  const std::string huge_temp =
      graph_with(R"({"id": 0, "size": 4, "output": true})",
                 R"({"id": 0, "cost": 1, "temp": 9223372036854775807, "outputs": [0]})");
  std::string message = input_error_of([&] { (void)parse_graph_json(huge_temp, "t.json"); });
  EXPECT_NE(message.find("above the limit of 2^62 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("node 0 ('n0') with temp 9223372036854775807"), std::string::npos)
      << message;
  const std::string three = graph_with(
      R"({"id": 0, "size": 4611686018427387904}, {"id": 1, "size": 4611686018427387904},
         {"id": 2, "size": 4611686018427387904, "output": true})",
      R"({"id": 0, "cost": 1, "outputs": [0]}, {"id": 1, "cost": 1, "inputs": [0], "outputs": [1]},
         {"id": 2, "cost": 1, "inputs": [1], "outputs": [2]})");
  message = input_error_of([&] { (void)parse_graph_json(three, "3.json"); });
  EXPECT_NE(message.find("value 1 ('v1') of size 4611686018427387904"), std::string::npos)
      << message;
  // Exactly at the limit is fine, and the peak is exact.
  const std::string at_limit =
      graph_with(R"({"id": 0, "size": 4611686018427387904, "output": true})",
                 R"({"id": 0, "cost": 1, "outputs": [0]})");
  EXPECT_EQ(baseline(parse_graph_json(at_limit, "ok.json")).peak_bytes, kMaxTotalBytes);
  const std::string costly =
      graph_with(R"({"id": 0, "size": 1}, {"id": 1, "size": 1, "output": true})",
                 R"({"id": 0, "cost": 1e308, "outputs": [0]},
                                           {"id": 1, "cost": 1e308, "inputs": [0], "outputs": [1]})");
  message = input_error_of([&] { (void)parse_graph_json(costly, "c.json"); });
  EXPECT_NE(message.find("c.json: the node costs add up to inf, above the limit of 1e+298"),
            std::string::npos)
      << message;
}

TEST(HostileInput, BudgetsAbove2To62AreRangeCheckedBeforeConversion) {
  for (const char* text : {"9223372036854775807", "1e18%", "99999999999999999999GiB", "1e300"}) {
    SCOPED_TRACE(text);
    const std::string message = input_error_of([&] { (void)parse_budget(text, 1000000); });
    EXPECT_NE(message.find("above the limit of 2^62 bytes"), std::string::npos) << message;
  }
  EXPECT_EQ(parse_budget("4611686018427387904", 10).bytes, kMaxTotalBytes);
  const std::string long_text(100000, 'x');
  EXPECT_LT(input_error_of([&] { (void)parse_budget(long_text, 10); }).size(), 400u);
}

TEST(HostileInput, ChainedAliasesResolveInLinearTime) {
  constexpr int kAliases = 100000;
  std::string values = R"({"id": 0, "size": 8})";
  for (int v = 1; v <= kAliases; ++v)
    values += R"(, {"id": )" + std::to_string(v) + R"(, "size": 0, "alias_of": )" +
              std::to_string(v - 1) + "}";
  values += R"(, {"id": )" + std::to_string(kAliases + 1) + R"(, "size": 4, "output": true})";
  const std::string nodes =
      R"({"id": 0, "cost": 1, "outputs": [0]}, {"id": 1, "cost": 1, "inputs": [)" +
      std::to_string(kAliases) + R"(], "outputs": [)" + std::to_string(kAliases + 1) + "]}";
  // Linear resolution (speed is a bench matter; quadratic took ~12 s here, this takes < 1 s).
  const Graph g = parse_graph_json(graph_with(values, nodes), "aliases.json");
  // The last node reads the root (value 0) through 100,000 aliases.
  EXPECT_EQ(baseline(g).peak_bytes, 12);
  // A cycle of aliases is still named.
  const std::string cycle = graph_with(
      R"({"id": 0, "size": 0, "alias_of": 1}, {"id": 1, "size": 0, "alias_of": 0},
         {"id": 2, "size": 1, "output": true})",
      R"({"id": 0, "cost": 1, "outputs": [2]})");
  EXPECT_NE(input_error_of([&] {
              (void)parse_graph_json(cycle, "c.json");
            }).find("is part of a cycle of aliases"),
            std::string::npos);
}

TEST(HostileInput, LongNamesAreCutShortInMessages) {
  const std::string name(1'000'000, 'a');
  const std::string text = graph_with(R"({"id": 0, "name": ")" + name + R"(", "size": -1})",
                                      R"({"id": 0, "cost": 1, "outputs": [0]})");
  const std::string message = input_error_of([&] { (void)parse_graph_json(text, "n.json"); });
  EXPECT_NE(message.find("(1000000 bytes)"), std::string::npos) << message.substr(0, 300);
  EXPECT_LT(message.size(), 400u);
  const std::string kind =
      graph_with(R"({"id": 0, "size": 1, "output": true})",
                 R"({"id": 0, "cost": 1, "kind": ")" + name + R"(", "outputs": [0]})");
  EXPECT_LT(input_error_of([&] { (void)parse_graph_json(kind, "k.json"); }).size(), 400u);
}

// A two-stage chain whose first stage output has `a_bytes` bytes.
std::string chain_with_stage_bytes(const std::string& a_bytes) {
  return R"({"format": "remat-chain", "version": 1, "input": {"a": 8, "abar": 8, "delta": 8},
             "stages": [{"u_f": 1, "u_b": 2, "a": )" +
         a_bytes + R"(, "abar": )" + a_bytes + R"(, "delta": 8},
                        {"u_f": 1, "u_b": 2, "a": 8, "abar": 8, "delta": 8},
                        {"u_f": 0, "u_b": 0, "a": 8, "abar": 8, "delta": 8}]})";
}

TEST(HostileInput, ChainTotalsAbove2To61AreRefusedAndRotorSolvesLargeStages) {
  for (const char* bytes : {"2305843009213693952", "4611686018427387904"}) {  // 2^61, 2^62
    SCOPED_TRACE(bytes);
    const std::string message =
        input_error_of([&] { (void)parse_chain_json(chain_with_stage_bytes(bytes), "c.json"); });
    EXPECT_NE(message.find("c.json: stage 1: the chain's sizes and overheads add up to more than"),
              std::string::npos)
        << message;
  }
  // A stage of 2^59 + 2^59 bytes used to abort rotor's DP at a 100 % budget (its "no bytes"
  // sentinel was reachable); now it is solved, and 100 % is the store-all peak exactly.
  const Chain big = parse_chain_json(chain_with_stage_bytes("576460752303423488"), "big.json");
  const int64_t store_all = simulate_chain(big, store_all_sequence(big)).peak_bytes;
  SolveOptions options;
  options.budget = parse_budget("100%", store_all);
  EXPECT_EQ(options.budget.bytes, store_all);
  for (const char* persistence : {"strong", "weak"}) {
    SCOPED_TRACE(persistence);
    options.params = {{"persistence", persistence}};
    const ChainSolveResult r = solve(big, "rotor", options);
    EXPECT_LE(r.eval.peak_bytes, store_all);
    EXPECT_EQ(r.eval.cost, simulate_chain(big, store_all_sequence(big)).cost);
  }
  options.params.clear();
  // Chains built in code (Python, graph extraction) are checked when solved.
  Chain negative = big;
  negative.stages[1].o_b = -1;
  EXPECT_NE(input_error_of([&] {
              (void)solve(negative, "rotor", options);
            }).find("stage 2: a size is negative"),
            std::string::npos);
}

TEST(HostileInput, PercentBudgetsAreExactForPeaksDoublesCannotHold) {
  const int64_t peak = (int64_t{1} << 60) + 1;  // not a double
  EXPECT_EQ(parse_budget("100%", peak).bytes, peak);
  EXPECT_EQ(parse_budget("50%", peak).bytes, peak / 2);
  EXPECT_EQ(parse_budget("12.5%", 1000001).bytes, 125000);
}

TEST(HostileInput, ThreadCountsAreRangeChecked) {
  const Graph g = generate_random_layered({.num_nodes = 10, .seed = 1});
  SolveOptions options;
  options.budget.bytes = baseline(g).peak_bytes;
  options.threads = kMaxThreads + 1;
  EXPECT_NE(input_error_of([&] {
              (void)solve(g, "fastsa", options);
            }).find("threads must be in [1, 256] (got 257)"),
            std::string::npos);
}

TEST(HostileInput, APlanForAnotherGraphIsRefusedNamingBoth) {
  const Graph a = generate_random_layered({.num_nodes = 12, .seed = 1});
  const Graph b = generate_random_layered({.num_nodes = 12, .seed = 2});
  SolveOptions options;
  options.budget.bytes = baseline(a).peak_bytes;
  const std::string plan = plan_to_json(a, solve(a, "none", options), options.budget);
  EXPECT_EQ(parse_plan_json(a, plan, "p.json").sequence, default_schedule(a));
  const std::string message = input_error_of([&] { (void)parse_plan_json(b, plan, "p.json"); });
  EXPECT_NE(message.find("p.json: the plan was made for another graph"), std::string::npos)
      << message;
  EXPECT_NE(message.find(graph_fingerprint(b)), std::string::npos) << message;
  // The fingerprint is the graph's content: a renamed copy keeps it.
  const std::string body = R"("values": [{"id": 0, "size": 4, "output": true}],
                             "nodes": [{"id": 0, "cost": 1, "outputs": [0]}]})";
  const auto named = [&](const std::string& name) {
    return parse_graph_json(
        R"({"format": "remat-graph", "version": 1, "name": ")" + name + R"(", )" + body, "n.json");
  };
  EXPECT_EQ(graph_fingerprint(named("one")), graph_fingerprint(named("two")));
}

TEST(HostileInput, GeneratorsRefuseSizesTheyCannotBuild) {
  EXPECT_NE(input_error_of([] {
              (void)generate_random_layered({.num_nodes = 2'000'000'000, .seed = 1});
            }).find("--nodes must be in [1, 10000000]"),
            std::string::npos);
  EXPECT_NE(input_error_of([] {
              (void)generate_chain({.kind = "random", .length = 2'000'000'000});
            }).find("length must be in [1, 1000000]"),
            std::string::npos);
}

TEST(HostileInput, DuplicateNetworkxNamesAreMadeUnique) {
  const std::string text = R"({"directed": true, "multigraph": false, "graph": {},
    "nodes": [{"id": 0, "name": "x", "cost_cpu": 1, "cost_ram": 4},
              {"id": 1, "name": "x", "cost_cpu": 1, "cost_ram": 4},
              {"id": 2, "name": "x#1", "cost_cpu": 1, "cost_ram": 4}],
    "links": [{"source": 0, "target": 1}, {"source": 1, "target": 2}]})";
  const Graph g = import_networkx_json(text, "nx.json");
  std::set<std::string> names;
  for (const Node& node : g.nodes()) EXPECT_TRUE(names.insert(node.name).second) << node.name;
}

TEST(HostileInput, AGraphWithoutOutputsIsRefusedAtReadTime) {
  const std::string message = input_error_of([] {
    (void)parse_graph_json(graph_with(R"({"id": 0, "size": 100}, {"id": 1, "size": 100})",
                                      R"({"id": 0, "cost": 1, "outputs": [0]},
                                         {"id": 1, "cost": 1, "inputs": [0], "outputs": [1]})"),
                           "t.json");
  });
  EXPECT_NE(message.find("t.json: the graph has no outputs"), std::string::npos) << message;
  // An output no node produces (a graph input) leaves nothing to compute either.
  EXPECT_NE(input_error_of([] {
              (void)parse_graph_json(
                  graph_with(R"({"id": 0, "size": 1, "output": true}, {"id": 1, "size": 1})",
                             R"({"id": 0, "cost": 1, "inputs": [0], "outputs": [1]})"),
                  "i.json");
            }).find("i.json: the graph has no outputs"),
            std::string::npos);
}

TEST(HostileInput, IntegersAbove2To63AreReportedAsWrittenNotNegative) {
  const auto error_of = [](const std::string& values, const std::string& nodes) {
    return input_error_of([&] { (void)parse_graph_json(graph_with(values, nodes), "b.json"); });
  };
  const std::string one_node = R"({"id": 0, "cost": 1, "outputs": [0]})";
  EXPECT_NE(error_of(R"({"id": 0, "size": 9223372036854775808, "output": true})", one_node)
                .find("value 0: field 'size' is 9223372036854775808, above the largest integer"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"id": 0, "size": 1, "output": true})",
                     R"({"id": 0, "cost": 1, "outputs": [18446744073709551615]})")
                .find("refers to value 18446744073709551615, which does not exist"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"id": 18446744073709551615, "size": 1, "output": true})", one_node)
                .find("field 'id' is 18446744073709551615"),
            std::string::npos);
  // A name written as a number keeps its digits.
  const Graph g = parse_graph_json(
      graph_with(R"({"id": 0, "size": 1, "output": true, "name": 18446744073709551615})", one_node),
      "n.json");
  EXPECT_EQ(g.value(ValueId{0}).name, "18446744073709551615");
  const std::string order = input_error_of([] {
    (void)import_networkx_json(R"({"directed": true, "graph": {"order": [18446744073709551615]},
      "nodes": [{"id": 0, "name": "x", "cost_cpu": 1, "cost_ram": 4}], "links": []})",
                               "nx.json");
  });
  EXPECT_NE(order.find("lists node 18446744073709551615"), std::string::npos) << order;
}

TEST(HostileInput, GraphJsonWriterEscapesNamesAndKeepsEveryNumber) {
  GraphSpec spec;
  spec.name = "q\"uote \\ back\nslash \x1b[31m \xc3\xa9";
  spec.values = {{.name = "tab\there", .size_bytes = kMaxTotalBytes / 4},
                 {.name = "\"", .size_bytes = 0, .alias_of = ValueId{0}},
                 {.name = "out", .size_bytes = 7, .is_output = true}};
  spec.nodes = {{.name = "a\u2028b", .cost = 0.1, .outputs = {ValueId{0}, ValueId{1}}},
                {.name = "c",
                 .cost = 1e297,
                 .inputs = {ValueId{1}},
                 .outputs = {ValueId{2}},
                 .op = "op\x01",
                 .phase = Phase::kBackward,
                 .temp_bytes = 3,
                 .recomputable = false},
                {.name = "d", .cost = 4.9e-324, .inputs = {ValueId{2}}}};
  const Graph g = Graph::build(std::move(spec), "spec");
  const std::string text = graph_to_json(g);
  const Graph again = parse_graph_json(text, "again.json");
  EXPECT_EQ(again.name(), g.name());
  for (int32_t v = 0; v < g.num_values(); ++v) {
    EXPECT_EQ(again.value(ValueId{v}).name, g.value(ValueId{v}).name);
    EXPECT_EQ(again.value(ValueId{v}).size_bytes, g.value(ValueId{v}).size_bytes);
    EXPECT_EQ(again.value(ValueId{v}).alias_of, g.value(ValueId{v}).alias_of);
  }
  for (int32_t n = 0; n < g.num_nodes(); ++n) {
    const Node &a = g.node(NodeId{n}), &b = again.node(NodeId{n});
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.op, b.op);
    EXPECT_EQ(a.cost, b.cost);  // bit for bit
    EXPECT_EQ(a.phase, b.phase);
    EXPECT_EQ(a.temp_bytes, b.temp_bytes);
    EXPECT_EQ(a.recomputable, b.recomputable);
    EXPECT_EQ(a.inputs, b.inputs);
    EXPECT_EQ(a.outputs, b.outputs);
  }
  EXPECT_EQ(graph_fingerprint(again), graph_fingerprint(g));
  EXPECT_EQ(text.find('\x1b'), std::string::npos);  // JSON escapes control characters
  EXPECT_EQ(graph_to_json(again), text);
}

// Skip edges may come from any earlier node: drawing a coin per candidate is quadratic in the
// nodes; drawing the gaps between edges is linear in the edges made. A thin graph of 300,000
// nodes has few edges, so it is quick only when linear.
TEST(HostileInput, RandomLayeredGraphsTakeTimeLinearInNodesAndEdges) {
  const Graph thin = generate_random_layered({.num_nodes = 300'000, .seed = 5, .width = 0.002});
  EXPECT_EQ(thin.num_nodes(), 300'000);
  EXPECT_LT(thin.total_input_count(), 4 * 300'000);
  // The gaps are drawn from the right distribution: the edge count matches its expectation.
  // Layers are 1 .. 1.5 x the mean width wide (0.75 x on average); a node reads each node of the
  // previous layer with probability edge_density and each of the l - 1 earlier layers' nodes
  // with probability skip_density / layers (on average over l: skip_density x width / 2); the
  // edges that make every node feed the next layer come on top.
  const RandomLayeredParams p{.num_nodes = 20'000, .seed = 6};
  const Graph g = generate_random_layered(p);
  const double width = 0.75 * p.width * std::sqrt(static_cast<double>(p.num_nodes)) * 2;
  const double expected = p.num_nodes * width * (p.edge_density + p.skip_density / 2);
  const auto edges = static_cast<double>(g.total_input_count());
  EXPECT_GT(edges, 0.95 * expected);
  EXPECT_LT(edges, 1.15 * expected);
}

}  // namespace
}  // namespace remat
