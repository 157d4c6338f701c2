// The judged remat::solve and the core toolkit every solver shares: the better-plan rule, and an
// returned plan never worse than the default schedule (a solver forced to return a bad plan gets
// the default schedule back; over budget that is status over-budget, never an error).
#include <gtest/gtest.h>

#include "remat/generate.h"
#include "remat/registry.h"
#include "remat/simulate.h"
#include "remat/toolkit.h"

namespace remat {
namespace {

TEST(BetterPlan, WithinBudgetCheaperElseLowerPeak) {
  const int64_t budget = 100;
  EXPECT_TRUE(better_plan({100, 5}, {101, 1}, budget));  // fits beats over budget
  EXPECT_FALSE(better_plan({101, 1}, {100, 5}, budget));
  EXPECT_TRUE(better_plan({90, 4}, {50, 5}, budget));     // both fit: cheaper wins
  EXPECT_TRUE(better_plan({50, 5}, {90, 5}, budget));     // same cost: lower peak
  EXPECT_TRUE(better_plan({150, 9}, {160, 1}, budget));   // both over: lower peak wins
  EXPECT_TRUE(better_plan({150, 1}, {150, 9}, budget));   // same peak: cheaper
  EXPECT_FALSE(better_plan({150, 1}, {150, 1}, budget));  // equal: keep the first
}

// Returns the default schedule with every node run twice more at the end: valid, but higher
// peak and cost than the default schedule.
class WorseThanDefault final : public Solver {
 public:
  Plan solve(const Graph& graph, const SolveOptions&) override {
    Plan plan;
    plan.sequence = default_schedule(graph);
    const Sequence again = plan.sequence;
    plan.sequence.insert(plan.sequence.begin(), again.begin(), again.end());
    plan.stats.status = SolveStatus::kFeasible;
    plan.stats.lists.push_back({"saved", {"x"}});
    return plan;
  }
};

const SolverEntry kWorseRow = {.name = "worse",
                               .description = "the default schedule, then every node twice more",
                               .make = [](const SolverDirectory&) -> std::unique_ptr<Solver> {
                                 return std::make_unique<WorseThanDefault>();
                               }};

TEST(JudgedSolve, OverBudgetPlanNeverWorseThanTheDefaultSchedule) {
  const Graph g = generate_random_layered({.num_nodes = 30, .seed = 3});
  const Evaluation base = simulate(g, default_schedule(g));
  WorseThanDefault solver;
  const Evaluation bad = simulate(g, solver.solve(g, {}).sequence);
  ASSERT_TRUE(bad.valid);
  ASSERT_GT(bad.cost, base.cost);

  SolveOptions options;
  options.budget.bytes = memory_lower_bound(g);  // feasible in principle, far below both peaks
  ASSERT_LT(options.budget.bytes, base.peak_bytes);
  const SolveResult r = solve(g, kWorseRow, options);
  EXPECT_EQ(r.plan.stats.status, SolveStatus::kOverBudget);
  EXPECT_EQ(r.plan.sequence, default_schedule(g));
  EXPECT_EQ(r.eval.peak_bytes, base.peak_bytes);
  EXPECT_EQ(r.eval.cost, base.cost);
  EXPECT_EQ(r.plan.stats.counter("replaced_by_default_schedule"), 1.0);
  EXPECT_TRUE(r.plan.stats.lists.empty());
  EXPECT_EQ(r.plan.solver, "worse");

  // Within budget, a plan costlier than a default schedule that also fits gives way to it too
  // (a search cut short may end costlier than the default schedule at a generous budget).
  options.budget.bytes = bad.peak_bytes;
  ASSERT_GE(options.budget.bytes, base.peak_bytes);
  const SolveResult fits = solve(g, kWorseRow, options);
  EXPECT_EQ(fits.plan.stats.status, SolveStatus::kFeasible);
  EXPECT_EQ(fits.plan.sequence, default_schedule(g));
  EXPECT_EQ(fits.eval.cost, base.cost);
  EXPECT_EQ(fits.plan.stats.counter("replaced_by_default_schedule"), 1.0);
}

TEST(JudgedSolve, FastsaCutShortNeverReturnsACostlierPlanThanAFittingDefault) {
  const Graph g = generate_random_layered({.num_nodes = 400, .seed = 5});
  const Evaluation base = simulate(g, default_schedule(g));
  SolveOptions options;
  options.budget.bytes = base.peak_bytes;  // 100 %: the default schedule fits
  options.time_limit_s = 0.001;            // cut short before the annealer converges
  options.threads = 4;
  const SolveResult r = solve(g, "fastsa", options);
  EXPECT_LE(r.eval.peak_bytes, options.budget.bytes);
  EXPECT_LE(r.eval.cost, base.cost);
}

TEST(Toolkit, DeadlineAndSeeds) {
  const Deadline none(1e12);
  EXPECT_FALSE(none.expired());
  EXPECT_GE(none.elapsed_s(), 0);
  EXPECT_TRUE(Deadline(-1).expired());
  EXPECT_NE(derive_seed(1, 0), derive_seed(1, 1));
  EXPECT_EQ(derive_seed(5, 3), derive_seed(5, 3));
}

}  // namespace
}  // namespace remat
