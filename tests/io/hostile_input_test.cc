// Hostile input (issue 15): each test is named after the defect it guards (D1, D2, ...). The
// readers must refuse with one InputError naming the place, never crash or answer wrongly.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "remat/io.h"
#include "remat/simulate.h"
#include "remat/solver.h"
#include "testing/testing.h"

namespace remat {
namespace {

using testing::input_error_of;

std::string graph_with(const std::string& values, const std::string& nodes) {
  return R"({"format": "remat-graph", "version": 1, "values": [)" + values + R"(], "nodes": [)" +
         nodes + "]}";
}

TEST(HostileInput, D1DeepNestingIsRefusedBeforeRecursion) {
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

TEST(HostileInput, D1ErrorMessagesDescribeLargeValuesInsteadOfDumpingThem) {
  const std::string text =
      graph_with(R"({"id": 0, "size": )" + std::string(500, '[') + std::string(500, ']') + "}",
                 R"({"id": 0, "cost": 1, "outputs": [0]})");
  const std::string message = input_error_of([&] { (void)parse_graph_json(text, "g.json"); });
  EXPECT_NE(message.find("must be an integer (got an array of 1 items)"), std::string::npos)
      << message;
}

TEST(HostileInput, D2NumberBeyondDoubleRangeIsAnInputErrorWithLineAndColumn) {
  const std::string text = "{\"format\": \"remat-graph\",\n \"version\": 1e400}";
  const std::string message = input_error_of([&] { (void)parse_graph_json(text, "big.json"); });
  EXPECT_NE(message.find("big.json:2:13: invalid JSON: number out of range"), std::string::npos)
      << message;
  const std::string cli = input_error_of([&] { (void)detect_file_kind("[1, -2e999]", "x.json"); });
  EXPECT_NE(cli.find("x.json:1:5:"), std::string::npos) << cli;
}

TEST(HostileInput, D3TotalBytesAbove2To62AreRefusedSoSumsStayExact) {
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
  EXPECT_NE(message.find("costs add up to more than a double"), std::string::npos) << message;
}

TEST(HostileInput, D5BudgetsAbove2To62AreRangeCheckedBeforeConversion) {
  for (const char* text : {"9223372036854775807", "1e18%", "99999999999999999999GiB", "1e300"}) {
    SCOPED_TRACE(text);
    const std::string message = input_error_of([&] { (void)parse_budget(text, 1000000); });
    EXPECT_NE(message.find("above the limit of 2^62 bytes"), std::string::npos) << message;
  }
  EXPECT_EQ(parse_budget("4611686018427387904", 10).bytes, kMaxTotalBytes);
  const std::string long_text(100000, 'x');
  EXPECT_LT(input_error_of([&] { (void)parse_budget(long_text, 10); }).size(), 400u);
}

TEST(HostileInput, D10ChainedAliasesResolveInLinearTime) {
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

TEST(HostileInput, D15LongNamesAreCutShortInMessages) {
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

}  // namespace
}  // namespace remat
