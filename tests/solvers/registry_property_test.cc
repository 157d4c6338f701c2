// The property suite over the whole registry (docs/design.md §4): every row runs on generated
// problems of the kinds it accepts (Accepts in solver.h), over several seeds and budgets, through
// the judged solve. Each plan is re-simulated here: valid, peak <= budget whenever the status says
// it fits, cost >= the cost lower bounds (the problem's and the solver's own), never worse than the
// default schedule by the better-plan rule, and the same seed gives the same plan. A new registry
// row is covered without writing a test. Every run stops on convergence or on a small work limit,
// never on the clock (a generous backstop), so every row's plans are checked for determinism.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "remat/error.h"
#include "remat/generate.h"
#include "remat/registry.h"

namespace remat {
namespace {

// Work units per solve: small, so that the whole suite takes seconds; the wall clock is only a
// backstop that no run reaches.
constexpr double kWorkLimit = 0.3;
constexpr double kTimeLimitS = 300;
constexpr double kGraphBudgetFractions[] = {0.5};
constexpr double kChainBudgetFractions[] = {0.4, 0.8};
constexpr uint64_t kSeeds[] = {1, 2};

bool fits_status(SolveStatus s) {
  return s == SolveStatus::kOptimal || s == SolveStatus::kFeasible;
}

// The graphs a row is run on: joint training graphs for every graph row (they have phases and
// chain structure), and random layered DAGs (no phases) for rows that do not need phases.
std::vector<Graph> graphs_for(const SolverEntry& entry, uint64_t seed) {
  std::vector<Graph> graphs;
  graphs.push_back(generate_joint({.num_nodes = 30, .seed = seed, .rows = 1024, .max_width = 128}));
  if (!entry.accepts.needs_phases)
    graphs.push_back(generate_random_layered({.num_nodes = 14, .seed = seed}));
  return graphs;
}

std::vector<Chain> chains_for(uint64_t seed) {
  return {generate_chain({.kind = "random", .length = 6, .seed = seed, .max_size = 20}),
          generate_chain({.kind = "resnet", .length = 12, .seed = seed})};
}

class RegistryProperty : public ::testing::TestWithParam<std::string_view> {
 protected:
  const SolverEntry& entry() const { return solver_entry(GetParam()); }
};

TEST_P(RegistryProperty, GraphPlans) {
  if (!entry().accepts.graph) GTEST_SKIP() << GetParam() << " takes no graphs";
  for (uint64_t seed : kSeeds)
    for (const Graph& g : graphs_for(entry(), seed))
      for (double fraction : kGraphBudgetFractions) {
        const Baseline base = baseline(g);
        SolveOptions options;
        // Between the memory lower bound and the baseline peak.
        const int64_t lower = memory_lower_bound(g);
        options.budget = {
            lower + static_cast<int64_t>(fraction * static_cast<double>(base.peak_bytes - lower))};
        options.work_limit = kWorkLimit;
        options.time_limit_s = kTimeLimitS;
        options.seed = seed;
        SCOPED_TRACE(::testing::Message() << GetParam() << " seed " << seed << " nodes "
                                          << g.num_nodes() << " budget " << fraction);
        const SolveResult r = solve(g, GetParam(), options);
        RecordProperty(fmt::format("status_seed{}_{}nodes", seed, g.num_nodes()),
                       std::string(to_string(r.plan.stats.status)));
        const Evaluation e = simulate(g, r.plan.sequence);
        ASSERT_TRUE(e.valid) << e.error;
        EXPECT_EQ(e.peak_bytes, r.eval.peak_bytes);
        EXPECT_DOUBLE_EQ(e.cost, r.eval.cost);
        if (fits_status(r.plan.stats.status)) {
          EXPECT_LE(e.peak_bytes, options.budget.bytes);
        }
        EXPECT_GE(e.cost, cost_lower_bound(g) * (1 - 1e-9));
        // A bound on the cost of plans within budget (an over-budget plan may be cheaper).
        if (r.plan.stats.cost_lower_bound && e.peak_bytes <= options.budget.bytes) {
          EXPECT_GE(e.cost, *r.plan.stats.cost_lower_bound * (1 - 1e-9));
        }
        EXPECT_FALSE(
            better_plan({base.peak_bytes, base.cost}, {e.peak_bytes, e.cost}, options.budget.bytes))
            << "worse than the default schedule: peak " << e.peak_bytes << " cost " << e.cost;
        EXPECT_LT(r.plan.stats.stop_reason, StopReason::kTimeLimit)
            << "stopped on the clock, not on its work";
        EXPECT_EQ(solve(g, GetParam(), options).plan.sequence, r.plan.sequence)
            << "same seed, different plan";
      }
}

TEST_P(RegistryProperty, ChainPlans) {
  if (!entry().accepts.chain) GTEST_SKIP() << GetParam() << " takes no chains";
  for (uint64_t seed : kSeeds)
    for (const Chain& chain : chains_for(seed))
      for (double fraction : kChainBudgetFractions) {
        const ChainEvaluation store_all = simulate_chain(chain, store_all_sequence(chain));
        SolveOptions options;
        options.budget = {static_cast<int64_t>(fraction * store_all.peak_bytes)};
        options.work_limit = kWorkLimit;
        options.time_limit_s = kTimeLimitS;
        options.seed = seed;
        SCOPED_TRACE(::testing::Message()
                     << GetParam() << " " << chain.name << " budget " << fraction);
        const ChainSolveResult r = solve(chain, GetParam(), options);
        const ChainEvaluation e = simulate_chain(chain, r.plan.sequence);
        ASSERT_TRUE(e.valid) << e.error;
        EXPECT_EQ(e.peak_bytes, r.eval.peak_bytes);
        EXPECT_DOUBLE_EQ(e.cost, r.eval.cost);
        if (fits_status(r.plan.stats.status)) {
          EXPECT_LE(e.peak_bytes, options.budget.bytes);
        }
        // Every stage's forward and backward at least once: store-all's makespan.
        EXPECT_GE(e.cost, store_all.cost * (1 - 1e-9));
        // A bound on the cost of plans within budget (an over-budget plan may be cheaper).
        if (r.plan.stats.cost_lower_bound && e.peak_bytes <= options.budget.bytes) {
          EXPECT_GE(e.cost, *r.plan.stats.cost_lower_bound * (1 - 1e-9));
        }
        if (r.plan.stats.status == SolveStatus::kInfeasible) {
          ASSERT_TRUE(r.plan.stats.min_feasible_budget.has_value());
          EXPECT_GT(*r.plan.stats.min_feasible_budget, options.budget.bytes);
        }
        EXPECT_FALSE(better_plan({store_all.peak_bytes, store_all.cost}, {e.peak_bytes, e.cost},
                                 options.budget.bytes))
            << "worse than store-all: peak " << e.peak_bytes << " cost " << e.cost;
        EXPECT_EQ(solve(chain, GetParam(), options).plan.sequence, r.plan.sequence)
            << "same seed, different plan";
      }
}

TEST_P(RegistryProperty, RefusesTheKindItDoesNotAcceptAndUnknownParameters) {
  const Graph g = generate_random_layered({.num_nodes = 6, .seed = 1});
  const Chain chain = chains_for(1)[0];
  SolveOptions options;
  options.budget = {baseline(g).peak_bytes};
  if (!entry().accepts.graph) {
    EXPECT_THROW(solve(g, GetParam(), options), InputError);
  }
  if (!entry().accepts.chain) {
    EXPECT_THROW(solve(chain, GetParam(), options), InputError);
  }
  options.params = {{"no_such_parameter", "1"}};
  if (entry().accepts.chain) {
    EXPECT_THROW(solve(chain, GetParam(), options), InputError);
  }
  if (entry().accepts.graph && !entry().accepts.needs_phases) {
    EXPECT_THROW(solve(g, GetParam(), options), InputError);
  }
}

std::vector<std::string_view> registry_names() {
  std::vector<std::string_view> names;
  for (const SolverEntry& e : solver_registry()) names.push_back(e.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(EveryRow, RegistryProperty, ::testing::ValuesIn(registry_names()),
                         [](const ::testing::TestParamInfo<std::string_view>& info) {
                           std::string name(info.param);
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace remat
