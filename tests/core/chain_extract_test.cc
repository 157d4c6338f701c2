// Graph → chain extraction and lowering (remat/lower.h) on generated joint graphs; the traced
// PyTorch models are covered by python/tests/test_graph_chain.py.
#include <gtest/gtest.h>

#include "remat/error.h"
#include "remat/generate.h"
#include "remat/lower.h"
#include "remat/registry.h"
#include "remat/simulate.h"

namespace remat {
namespace {

std::vector<StageRun> runs_of(const ChainSequence& ops) {
  std::vector<StageRun> runs;
  for (const ChainOp& op : ops) runs.push_back({op.stage, op.kind == ChainOpKind::kBackward});
  return runs;
}

class JointChain : public testing::TestWithParam<uint64_t> {};

TEST_P(JointChain, EveryNodeInOneStageAndStoreAllIsTheBaseline) {
  const Graph g = generate_joint({.num_nodes = 400, .seed = GetParam()});
  const GraphChain gc = extract_chain(g);
  ASSERT_GE(gc.chain.stages.size(), 2u);
  std::vector<int> seen(static_cast<size_t>(g.num_nodes()), 0);
  for (const StageNodes& s : gc.stages) {
    for (NodeId n : s.forward) ++seen[static_cast<size_t>(n.value())];
    for (NodeId n : s.backward) ++seen[static_cast<size_t>(n.value())];
  }
  for (int count : seen) EXPECT_EQ(count, 1);
  const Evaluation e = simulate(g, lower_chain_plan(g, gc, store_all_runs(gc)));
  ASSERT_TRUE(e.valid) << e.error;
  const Baseline base = baseline(g);
  EXPECT_EQ(e.cost, base.cost);
  EXPECT_LE(e.peak_bytes, base.peak_bytes);
}

TEST_P(JointChain, LoweredRotorPlanFitsWhenTheChainPlanFits) {
  const Graph g = generate_joint({.num_nodes = 400, .seed = GetParam()});
  const GraphChain gc = extract_chain(g);
  const int64_t base_peak = baseline(g).peak_bytes;
  for (int percent : {90, 70, 50, 40}) {
    const int64_t budget = base_peak * percent / 100;
    SolveOptions options;
    options.budget = {std::max<int64_t>(0, budget - gc.resident_bytes)};
    const ChainSolveResult r = solve(gc.chain, "rotor", options);
    const Evaluation e = simulate(g, lower_chain_plan(g, gc, runs_of(r.plan.sequence)));
    ASSERT_TRUE(e.valid) << e.error;
    EXPECT_NEAR(e.cost, r.eval.cost + gc.fixed_cost, 1e-9 * e.cost);
    if (r.eval.peak_bytes <= options.budget.bytes) {
      EXPECT_LE(e.peak_bytes, budget) << percent;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, JointChain, testing::Values(1, 2, 3));

TEST(ChainExtract, GraphWithoutPhasesIsUnsupported) {
  const Graph g = generate_random_layered({.num_nodes = 50, .seed = 1});
  try {
    (void)extract_chain(g);
    FAIL() << "no error";
  } catch (const UnsupportedGraph& e) {
    EXPECT_NE(std::string(e.what()).find("has no phase"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace remat
