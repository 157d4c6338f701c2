// Lemma 3.4 on generated joint graphs: every cut is a valid V_saved (the backward is computable
// from V_saved and the gradient seeds without recomputing a banned node), checked by a small
// closure written here, apart from the flow code; on tiny graphs the cut is the cheapest valid set
// (Theorem 3.6, by enumeration); and the lowered plans keep what the cut promises.
#include <gtest/gtest.h>

#include <algorithm>

#include "mincut/mincut.h"
#include "mincut/validity.h"
#include "remat/simulate.h"
#include "testing/generated_joint.h"
#include "testing/testing.h"

namespace remat {
namespace {

using mincut::analyze_joint;
using mincut::find_min_cut;
using mincut::JointAnalysis;
using mincut::MaxFlowAlgorithm;
using mincut::MincutParams;
using mincut::Objective;
using testing::forward_set;
using testing::ForwardSet;
using testing::generated_joint;
using testing::valid_saved;

struct Case {
  int32_t nodes;
  uint64_t seed;
};
class MincutLemma34 : public ::testing::TestWithParam<Case> {};

TEST_P(MincutLemma34, EveryCutIsAValidSavedSet) {
  const Graph g = generated_joint(GetParam().nodes, GetParam().seed);
  const ForwardSet f = forward_set(g);
  for (Objective objective : {Objective::kRuntime, Objective::kMemory}) {
    for (bool bans : {true, false}) {
      const MincutParams p{.objective = objective,
                           .ban_compute = bans,
                           .ban_random = bans,
                           .ban_reductions = bans,
                           .ban_unfusible = bans};
      const JointAnalysis a = analyze_joint(g, p);
      for (int32_t i = 0; i < g.num_values(); ++i)
        ASSERT_EQ(static_cast<bool>(a.in_vf[ValueId{i}]), f.value[static_cast<size_t>(i)]);
      const mincut::Cut bk = find_min_cut(g, a, MaxFlowAlgorithm::kBoykovKolmogorov);
      EXPECT_TRUE(valid_saved(g, f, a, bk.saved));
      const mincut::Cut pr = find_min_cut(g, a, MaxFlowAlgorithm::kPushRelabel);
      EXPECT_TRUE(valid_saved(g, f, a, pr.saved));
      EXPECT_NEAR(bk.capacity, pr.capacity, 1e-9 * std::max(1.0, bk.capacity));
      // Dropping any saved value with positive capacity breaks validity (no wasted saves).
      for (size_t k = 0; k < bk.saved.size(); ++k) {
        if (a.capacity[bk.saved[k]] <= 1e-9 * bk.capacity) continue;
        std::vector<ValueId> fewer = bk.saved;
        fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(k));
        EXPECT_FALSE(valid_saved(g, f, a, fewer)) << g.describe(bk.saved[k]);
      }
    }
  }
}

TEST_P(MincutLemma34, LoweredPlansKeepTheCutsPromises) {
  const Graph g = generated_joint(GetParam().nodes, GetParam().seed);
  const JointAnalysis a = analyze_joint(g, MincutParams{});
  const mincut::Cut cut = find_min_cut(g, a, MaxFlowAlgorithm::kBoykovKolmogorov);
  for (mincut::Lowering lowering : {mincut::Lowering::kRelease, mincut::Lowering::kKeep}) {
    const mincut::Lowered low = mincut::lower_cut(g, a, cut.saved, lowering);
    const Evaluation e = simulate(g, low.sequence);
    ASSERT_TRUE(e.valid) << e.error;
    std::vector<int> runs(static_cast<size_t>(g.num_nodes()), 0);
    for (NodeId n : low.sequence) ++runs[static_cast<size_t>(n.value())];
    for (int32_t i = 0; i < g.num_nodes(); ++i) {
      const int r = runs[static_cast<size_t>(i)];
      if (a.banned(NodeId{i})) {
        EXPECT_LE(r, 1) << g.describe(NodeId{i});
      }
      if (!a.node_in_vf[NodeId{i}]) {
        EXPECT_EQ(r, 1) << g.describe(NodeId{i});
      }
      if (lowering == mincut::Lowering::kKeep) {
        EXPECT_LE(r, 2) << g.describe(NodeId{i});
      }
    }
    for (ValueId v : cut.saved) {
      if (!g.is_graph_input(v)) {
        EXPECT_EQ(runs[static_cast<size_t>(g.producer(v).value())], 1) << g.describe(v);
      }
    }
  }
}

TEST(MincutLowering, StepLimitStopsTheReleaseLowering) {
  // The memory cut of a chain recomputes quadratically under kRelease; a limit marks the
  // lowering incomplete so the solver can use kKeep instead.
  const Graph g = generated_joint(300, 6);
  const JointAnalysis a = analyze_joint(g, MincutParams{.objective = Objective::kMemory});
  const mincut::Cut cut = find_min_cut(g, a, MaxFlowAlgorithm::kBoykovKolmogorov);
  const mincut::Lowered full = mincut::lower_cut(g, a, cut.saved, mincut::Lowering::kRelease);
  ASSERT_TRUE(full.complete);
  const auto limit = static_cast<int64_t>(full.sequence.size()) / 2;
  EXPECT_FALSE(mincut::lower_cut(g, a, cut.saved, mincut::Lowering::kRelease, limit).complete);
  EXPECT_TRUE(mincut::lower_cut(g, a, cut.saved, mincut::Lowering::kKeep, limit).complete);
}

INSTANTIATE_TEST_SUITE_P(Generated, MincutLemma34,
                         ::testing::Values(Case{30, 1}, Case{30, 2}, Case{60, 3}, Case{120, 4},
                                           Case{120, 5}, Case{300, 6}, Case{300, 7}, Case{600, 8}));

TEST(MincutOptimality, CutEqualsTheCheapestValidSetOnTinyGraphs) {
  // Theorem 3.6: the min cut is the least-capacity valid V_saved. Enumerate every subset of V_f.
  int checked = 0;
  for (uint64_t seed = 1; seed <= 40 && checked < 12; ++seed) {
    const Graph g = generated_joint(14 + static_cast<int32_t>(seed % 6), seed);
    const ForwardSet f = forward_set(g);
    std::vector<ValueId> vf;
    for (int32_t i = 0; i < g.num_values(); ++i)
      if (f.value[static_cast<size_t>(i)]) vf.push_back(ValueId{i});
    if (vf.size() > 16) continue;
    for (bool bans : {true, false}) {
      const JointAnalysis a = analyze_joint(g, MincutParams{.ban_compute = bans});
      double best = -1;
      for (uint32_t mask = 0; mask < (1u << vf.size()); ++mask) {
        std::vector<ValueId> saved;
        double capacity = 0;
        for (size_t k = 0; k < vf.size(); ++k)
          if (mask & (1u << k)) {
            saved.push_back(vf[k]);
            capacity += a.capacity[vf[k]];
          }
        if ((best < 0 || capacity < best) && valid_saved(g, f, a, saved)) best = capacity;
      }
      const mincut::Cut cut = find_min_cut(g, a, MaxFlowAlgorithm::kBoykovKolmogorov);
      EXPECT_NEAR(cut.capacity, best, 1e-9 * best) << g.name();
    }
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

TEST(MincutSolve, SameGraphSameOptionsSamePlan) {
  const Graph g = generated_joint(400, 11);
  const Baseline base = baseline(g);
  const SolveResult a = testing::solve_and_check(g, base.peak_bytes, "mincut");
  const SolveResult b = testing::solve_and_check(g, base.peak_bytes, "mincut");
  EXPECT_EQ(a.plan.sequence, b.plan.sequence);
}

TEST(MincutSolve, BudgetDecidesTheStatusAndTheFallback) {
  const Graph g = generated_joint(400, 12);
  const Baseline base = baseline(g);
  const SolveResult runtime = testing::solve_and_check(g, base.peak_bytes, "mincut");
  EXPECT_EQ(runtime.plan.stats.status, SolveStatus::kFeasible);
  EXPECT_EQ(runtime.plan.stats.counter("memory_fallback"), 0);
  EXPECT_LT(runtime.eval.peak_bytes, base.peak_bytes);
  // Below the peaks of both lowerings of the runtime cut, a cut with fewer bans replaces it...
  int64_t tight = runtime.eval.peak_bytes;
  for (const char* lowering : {"release", "keep"})
    tight = std::min(
        tight, testing::solve_and_check(g, base.peak_bytes, "mincut", {{"lowering", lowering}})
                   .eval.peak_bytes);
  --tight;
  const SolveResult relaxed = testing::solve_and_check(g, tight, "mincut");
  EXPECT_GE(relaxed.plan.stats.counter("fallback_rung"), 1);
  for (const auto& [key, list] : relaxed.plan.stats.lists)
    if (key == "relaxed") {
      ASSERT_FALSE(list.empty());
      EXPECT_EQ(list[0], "ban_unfusible");  // the first rule given up
    }
  EXPECT_LT(relaxed.eval.peak_bytes, tight);
  EXPECT_EQ(relaxed.plan.stats.status, SolveStatus::kFeasible);
  // ...down to the memory objective for the tightest budgets.
  const SolveResult memory = testing::solve_and_check(
      g, base.peak_bytes, "mincut", {{"objective", "memory"}, {"lowering", "release"}});
  const SolveResult lowest = testing::solve_and_check(g, memory.eval.peak_bytes, "mincut");
  EXPECT_EQ(lowest.plan.stats.counter("memory_fallback"), 1);
  EXPECT_EQ(lowest.eval.peak_bytes, memory.eval.peak_bytes);
  EXPECT_EQ(lowest.plan.stats.status, SolveStatus::kFeasible);
  // ...and without the fallback the runtime plan is returned as over budget.
  const SolveResult strict = testing::solve_and_check(g, tight, "mincut", {{"fallback", "false"}});
  EXPECT_EQ(strict.plan.stats.status, SolveStatus::kOverBudget);
  EXPECT_GT(strict.eval.peak_bytes, tight);
}

}  // namespace
}  // namespace remat
