// `remat gen joint`: generated training graphs have the shape the min-cut solver (and any solver
// that needs phases) relies on.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "remat/generate.h"
#include "remat/io.h"
#include "testing/testing.h"

namespace remat {
namespace {

TEST(JointGenerator, NodeCountPhasesInputsAndOutputs) {
  for (int32_t n : {5, 40, 500, 2000}) {
    const Graph g = generate_joint({.num_nodes = n, .seed = 3});
    EXPECT_LE(g.num_nodes(), n);
    EXPECT_GE(g.num_nodes(), n - 8);
    bool in_backward = false;
    for (const Node& node : g.nodes()) {
      ASSERT_NE(node.phase, Phase::kUnknown) << node.name;
      if (node.phase == Phase::kBackward) in_backward = true;
      EXPECT_TRUE(node.phase == Phase::kBackward || !in_backward) << "forward after backward";
    }
    // Inputs: data, parameters (read by the forward) and the seed (read only by the backward).
    int seeds = 0;
    for (ValueId v : g.graph_inputs()) {
      bool forward_user = false;
      for (NodeId u : g.users(v)) forward_user = forward_user || g.node(u).phase == Phase::kForward;
      seeds += !forward_user;
    }
    EXPECT_EQ(seeds, 1);
    EXPECT_TRUE(g.find_value("grad_loss").has_value());
    // Outputs: the loss (forward) and the parameter gradients (backward), one per parameter.
    int forward_outputs = 0;
    for (ValueId v : g.graph_outputs())
      forward_outputs += g.node(g.producer(v)).phase == Phase::kForward;
    EXPECT_EQ(forward_outputs, 1);
    EXPECT_EQ(g.graph_outputs().size(),
              g.graph_inputs().size() - 1);  // minus data and seed, plus loss
  }
}

TEST(JointGenerator, KindsAndRandomOpsAreRealistic) {
  const Graph g = generate_joint({.num_nodes = 1500, .seed = 5});
  std::set<OpKind> kinds;
  for (const Node& node : g.nodes()) {
    kinds.insert(node.kind);
    if (node.kind == OpKind::kRandom) {
      EXPECT_FALSE(node.recomputable) << node.name;
      EXPECT_EQ(g.value(node.outputs[0]).size_bytes % 4, 0);
      // The mask it feeds is a boolean: a quarter of the float random tensor.
      const NodeId lt = g.users(node.outputs[0])[0];
      EXPECT_EQ(4 * g.value(g.node(lt).outputs[0]).size_bytes, g.value(node.outputs[0]).size_bytes);
    }
  }
  EXPECT_EQ(kinds, (std::set<OpKind>{OpKind::kCompute, OpKind::kPointwise, OpKind::kReduction,
                                     OpKind::kView, OpKind::kRandom}));
}

TEST(JointGenerator, SameSeedSameGraphOtherSeedOtherGraph) {
  const std::string a = graph_to_json(generate_joint({.num_nodes = 300, .seed = 9}));
  EXPECT_EQ(a, graph_to_json(generate_joint({.num_nodes = 300, .seed = 9})));
  EXPECT_NE(a, graph_to_json(generate_joint({.num_nodes = 300, .seed = 10})));
}

TEST(JointGenerator, CommandWritesAGraphAndRejectsBadSizes) {
  const std::string dir = testing::temp_dir("gen_joint");
  const std::string out = dir + "/j.json";
  const testing::CommandResult ok = testing::run_remat("gen joint --nodes 120 --seed 2 -o " + out);
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const Graph g = read_graph_file(out);
  EXPECT_EQ(graph_to_json(g), graph_to_json(generate_joint({.num_nodes = 120, .seed = 2})));
  const testing::CommandResult solved =
      testing::run_remat("solve " + out + " --solver mincut --json");
  ASSERT_EQ(solved.exit_code, 0) << solved.err;
  EXPECT_NE(solved.out.find("\"saved\""), std::string::npos);
  EXPECT_NE(solved.out.find("\"saved_bytes\""), std::string::npos);
  const std::string bad_out = dir + "/bad.json";
  const testing::CommandResult bad = testing::run_remat("gen joint --nodes 2 -o " + bad_out);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--nodes must be in [5, 10000000] (got 2)"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::ifstream(bad_out).good());
}

}  // namespace
}  // namespace remat
