#include <gtest/gtest.h>

#include "remat/error.h"
#include "remat/registry.h"
#include "testing/testing.h"

namespace remat {
namespace {

TEST(Budget, PercentAndUnits) {
  EXPECT_EQ(parse_budget("50%", 1000).bytes, 500);
  EXPECT_EQ(parse_budget(" 12.5% ", 1000).bytes, 125);
  EXPECT_EQ(parse_budget("123456", 1).bytes, 123456);
  EXPECT_EQ(parse_budget("90MB", 1).bytes, 90'000'000);
  EXPECT_EQ(parse_budget("1.5GiB", 1).bytes, 1'610'612'736);
  EXPECT_EQ(parse_budget("2KiB", 1).bytes, 2048);
  EXPECT_EQ(parse_budget("7B", 1).bytes, 7);
}

TEST(Budget, RejectsGarbage) {
  for (const char* text : {"", "%", "abc", "-5%", "5XB", "12 34", "nan"})
    EXPECT_THROW(parse_budget(text, 1000), InputError) << text;
}

TEST(Budget, BytesAreExactIntegersAndOnlyDecimal) {
  // 2^62 + 1 is one byte above the limit; a double would have read it as 2^62.
  EXPECT_EQ(parse_budget("4611686018427387904", 1).bytes, kMaxTotalBytes);
  EXPECT_NE(testing::input_error_of([] {
              (void)parse_budget("4611686018427387905", 1);
            }).find("is above the limit of 2^62 bytes"),
            std::string::npos);
  EXPECT_EQ(parse_budget("4194304TiB", 1).bytes, kMaxTotalBytes);  // 2^22 * 2^40, exactly
  EXPECT_THROW(parse_budget("4194305TiB", 1), InputError);
  EXPECT_EQ(parse_budget("1e3", 1).bytes, 1000);
  EXPECT_EQ(parse_budget("1e+3", 1).bytes, 1000);  // as Python prints a float
  // std::stod's other spellings are not budgets: 0x10 is not 16 bytes.
  for (const char* text : {"0x10", "0X1p4", "inf", "infinity", "+5", "1e", ".", "5e3.5", "1,5"})
    EXPECT_NE(
        testing::input_error_of([&] { (void)parse_budget(text, 1000); }).find("invalid budget"),
        std::string::npos)
        << text;
}

TEST(Solve, BaselineIsJudgedBySimulator) {
  const Graph g = testing::graph_from_json(R"({"format": "remat-graph", "version": 1,
    "values": [{"id": 0, "name": "a", "size": 10}, {"id": 1, "name": "b", "size": 5, "output": true}],
    "nodes": [{"id": 0, "name": "f", "cost": 1, "outputs": [0]},
              {"id": 1, "name": "g", "cost": 1, "inputs": [0], "outputs": [1]}]})");
  // Baseline peak 15; lower bound 15 too.
  SolveResult r = testing::solve_and_check(g, 15, "none");
  EXPECT_EQ(r.plan.stats.status, SolveStatus::kOptimal);
  EXPECT_EQ(r.eval.peak_bytes, 15);
  r = testing::solve_and_check(g, 14, "none");
  EXPECT_EQ(r.plan.stats.status, SolveStatus::kInfeasible);
  EXPECT_EQ(r.plan.stats.min_feasible_budget, 15);
  EXPECT_THROW(make_solver("fastsaa"), InputError);
  EXPECT_THROW(testing::solve_and_check(g, 15, "none", {{"x", "1"}}), InputError);
}

}  // namespace
}  // namespace remat
