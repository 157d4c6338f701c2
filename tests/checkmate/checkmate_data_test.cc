// Checkmate on the MOCCASIN data set (../shared/benchmarks): the published optima are reached and
// never beaten. Its own executable, reported as skipped when the data is absent. Proving the
// optima (CM 1 at 90 % and 80 %: seconds of CBC each) is bench/checkmate_bench.cc's; the unit
// tests prove optimality on graphs a brute force can check (checkmate_test.cc).
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "remat/io.h"
#include "remat/registry.h"
#include "remat/simulate.h"
#include "testing/testing.h"

namespace remat {
namespace {

// Published optima (FastSA Table 1, from the MOCCASIN and Checkmate papers).
struct PublishedCell {
  const char* prefix;
  int percent;
  double optimum_ci;  // published Checkmate MILP CI %
};
constexpr PublishedCell kCm1[] = {{"fcn_8_vgg_32_416_608_3_train", 90, 0.0},
                                  {"fcn_8_vgg_32_416_608_3_train", 80, 0.1}};
constexpr PublishedCell kRl1[] = {{"random_layered_n100_", 90, 0.8},
                                  {"random_layered_n100_", 80, 2.3}};

struct CellRun {
  SolveResult result;
  double ci = 0;
};

// Solves a cell with a work limit, so the outcome does not depend on the machine's load.
CellRun run_cell(const std::string& dir, const PublishedCell& cell, std::string_view solver,
                 double work_limit) {
  const Graph g = read_graph_file(testing::bench_file(dir, cell.prefix));
  const Baseline base = baseline(g);
  SolveOptions options;
  options.budget.bytes = static_cast<int64_t>(cell.percent / 100.0 * base.peak_bytes);
  options.work_limit = work_limit;
  options.time_limit_s = backstop_time_limit(work_limit);
  CellRun run{solve(g, solver, options), 0};
  run.ci = 100 * (run.result.eval.cost / base.cost - 1);
  EXPECT_LE(run.result.eval.peak_bytes, options.budget.bytes) << cell.prefix << cell.percent;
  // A fixed-order plan below a published optimum would mean the model is wrong.
  EXPECT_GE(run.ci, cell.optimum_ci - 0.05) << solver << " " << cell.prefix << cell.percent;
  return run;
}

// checkmate-lp's plans (about a second each) never beat the published optima either.
TEST(CheckmateData, LpPlansStayAboveThePublishedOptima) {
  const std::optional<std::string> dir = testing::bench_data_dir();
  if (!dir) GTEST_SKIP() << "MOCCASIN data absent (../shared/benchmarks/moccasin)";
  for (const PublishedCell& cell : {kCm1[1], kRl1[1]}) {
    const CellRun run = run_cell(*dir, cell, "checkmate-lp", 5);
    EXPECT_EQ(run.result.plan.stats.status, SolveStatus::kFeasible);
    ASSERT_TRUE(run.result.plan.stats.cost_lower_bound);
    EXPECT_LE(*run.result.plan.stats.cost_lower_bound, run.result.eval.cost);
  }
}

// RL 1 at 90 % / 80 % within one work unit: CI at most the published MILP optima (0.8 / 2.3).
// The fixed-order annealing warm start finds both optima; the repair heuristics alone do not.
TEST(CheckmateData, Rl1ReachesThePublishedOptimaWithinOneWorkUnit) {
  const std::optional<std::string> dir = testing::bench_data_dir();
  if (!dir) GTEST_SKIP() << "MOCCASIN data absent (../shared/benchmarks/moccasin)";
  for (const PublishedCell& cell : kRl1) {
    const CellRun run = run_cell(*dir, cell, "checkmate", 1);
    EXPECT_LE(run.ci, cell.optimum_ci + 0.005) << cell.percent;
    EXPECT_EQ(run.result.plan.stats.counter("mip_start"), 1.0);
  }
}

}  // namespace
}  // namespace remat
