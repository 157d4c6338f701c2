// The min-cut paper's examples (papers/fusion-aware-mincut.txt §2.2, §2.3, §3.5) as graphs with
// their expected cuts, the ban rules of §3.1/§3.4 one at a time, parameters and bad input.
#include <gtest/gtest.h>

#include <algorithm>

#include "mincut/mincut.h"
#include "mincut/validity.h"
#include "remat/io.h"
#include "testing/testing.h"

namespace remat {
namespace {

using mincut::analyze_joint;
using mincut::cut_capacity;
using mincut::find_min_cut;
using mincut::JointAnalysis;
using mincut::MincutParams;
using testing::count_runs;
using testing::input_error_of;
using testing::solve_and_check;

Graph example(const std::string& name) {
  return read_graph_file(std::string(REMAT_SOURCE_DIR) + "/tests/data/mincut/" + name + ".json");
}

std::vector<std::string> names(const Graph& g, const std::vector<ValueId>& values) {
  std::vector<std::string> out;
  for (ValueId v : values) out.push_back(g.value(v).name);
  return out;
}

std::vector<ValueId> values(const Graph& g, const std::vector<std::string>& names) {
  std::vector<ValueId> out;
  for (const std::string& n : names) out.push_back(*g.find_value(n));
  return out;
}

std::vector<std::string> saved_list(const SolveResult& r) {
  for (const auto& [key, list] : r.plan.stats.lists)
    if (key == "saved") return list;
  return {};
}

SolveResult solve_mincut(const Graph& g, ParamMap params = {}) {
  return solve_and_check(g, baseline(g).peak_bytes, "mincut", std::move(params));
}

TEST(MincutPaper, F1SavesOnlyAdd3) {
  // §2.3 f1 / §3.5: x = a + b + c + d; cos(cos(x)). Only add3 is saved; cos1 is recomputed.
  const Graph g = example("f1");
  const JointAnalysis a = analyze_joint(g, MincutParams{});
  const mincut::Cut cut = find_min_cut(g, a, mincut::MaxFlowAlgorithm::kBoykovKolmogorov);
  EXPECT_EQ(names(g, cut.saved), std::vector<std::string>{"add3"});
  // Naive AD saves x and cos(x); naive checkpointing saves the four inputs (§3.2). Both are valid
  // cuts of G' and both cost more than the chosen one.
  const testing::ForwardSet f = testing::forward_set(g);
  const std::vector<ValueId> naive_ad = values(g, {"add3", "cos1"});
  const std::vector<ValueId> naive_checkpoint = values(g, {"a", "b", "c", "d"});
  EXPECT_TRUE(testing::valid_saved(g, f, a, naive_ad));
  EXPECT_TRUE(testing::valid_saved(g, f, a, naive_checkpoint));
  EXPECT_TRUE(testing::valid_saved(g, f, a, cut.saved));
  EXPECT_FALSE(testing::valid_saved(g, f, a, values(g, {"add2"})));  // d is missing
  EXPECT_GT(cut_capacity(a, naive_ad), cut.capacity);
  EXPECT_GT(cut_capacity(a, naive_checkpoint), cut.capacity);
  // add3 is not materialised (all its users fuse): it costs a write and a read, x1.1 reweighted.
  EXPECT_DOUBLE_EQ(cut.capacity, 2 * 1000 * 1.1);

  const SolveResult r = solve_mincut(g);
  EXPECT_EQ(saved_list(r), std::vector<std::string>{"add3"});
  EXPECT_EQ(count_runs(g, r.plan.sequence, "cos1"), 2);  // recomputed for sin2
  EXPECT_EQ(count_runs(g, r.plan.sequence, "add3"), 1);
}

TEST(MincutPaper, GeluSavesTheInputNotTheIntermediates) {
  // §2.2: with fusion, GeLU's backward should read x and recompute the pointwise chain.
  const Graph g = example("gelu");
  const SolveResult r = solve_mincut(g);
  EXPECT_EQ(saved_list(r), std::vector<std::string>{"x"});
  EXPECT_EQ(count_runs(g, r.plan.sequence, "tanh"), 2);
  // Naive AD would save every forward value the backward reads (t5, t6, t7 and x).
  const JointAnalysis a = analyze_joint(g, MincutParams{});
  const std::vector<ValueId> naive_ad = values(g, {"x", "t5", "t6", "t7"});
  EXPECT_TRUE(testing::valid_saved(g, testing::forward_set(g), a, naive_ad));
  EXPECT_GT(cut_capacity(a, naive_ad), cut_capacity(a, values(g, {"x"})));
}

TEST(MincutPaper, DropoutSavesTheMaskAndNeverRecomputesTheRandomOp) {
  // §2.3 f2: save the boolean mask (1 byte per element), not the float random tensor.
  const Graph g = example("dropout");
  for (const ParamMap& params :
       {ParamMap{}, ParamMap{{"objective", "memory"}}, ParamMap{{"ban_random", "false"}}}) {
    const SolveResult r = solve_mincut(g, params);
    EXPECT_EQ(saved_list(r), std::vector<std::string>{"mask"});
    // Saving the float random tensor is valid too, but costs four times the bytes.
    const JointAnalysis a = analyze_joint(g, mincut::parse_mincut_params(params));
    const std::vector<ValueId> rand = values(g, {"rand"});
    EXPECT_TRUE(testing::valid_saved(g, testing::forward_set(g), a, rand));
    EXPECT_GT(cut_capacity(a, rand), cut_capacity(a, values(g, {"mask"})));
    EXPECT_EQ(count_runs(g, r.plan.sequence, "rand_like"), 1);
  }
}

TEST(MincutPaper, MemoryObjectiveSavesOnlyResidentValuesOnF1) {
  // Every recomputable node allowed, capacity = bytes and resident inputs free: naive
  // checkpointing, the "checkpoint as little as possible" end.
  const Graph g = example("f1");
  const SolveResult r = solve_mincut(g, {{"objective", "memory"}});
  EXPECT_EQ(saved_list(r), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(r.plan.stats.counter("saved_bytes"), 4000);
  EXPECT_EQ(count_runs(g, r.plan.sequence, "add3"), 2);
}

// x (input) -> linear(x, w) -> h -> relu -> r -> loss; the backward reads r and w and x.
constexpr char kLinearRelu[] = R"({"format": "remat-graph", "version": 1,
  "values": [{"id": 0, "name": "x", "size": 1000}, {"id": 1, "name": "w", "size": 10},
             {"id": 2, "name": "h", "size": 4000}, {"id": 3, "name": "r", "size": 4000},
             {"id": 4, "name": "loss", "size": 4, "output": true},
             {"id": 5, "name": "grad_loss", "size": 4}, {"id": 6, "name": "gr", "size": 4000},
             {"id": 7, "name": "gh", "size": 4000}, {"id": 8, "name": "gw", "size": 10, "output": true}],
  "nodes": [{"id": 0, "name": "linear", "kind": "compute", "phase": "forward", "cost": 100, "inputs": [0, 1], "outputs": [2]},
            {"id": 1, "name": "relu", "kind": "pointwise", "phase": "forward", "cost": 1, "inputs": [2], "outputs": [3]},
            {"id": 2, "name": "sum", "kind": "reduction", "phase": "forward", "cost": 1, "inputs": [3], "outputs": [4]},
            {"id": 3, "name": "sum_backward", "kind": "pointwise", "phase": "backward", "cost": 1, "inputs": [5], "outputs": [6]},
            {"id": 4, "name": "relu_backward", "kind": "pointwise", "phase": "backward", "cost": 1, "inputs": [6, 3], "outputs": [7]},
            {"id": 5, "name": "linear_grad_w", "kind": "compute", "phase": "backward", "cost": 100, "inputs": [7, 0], "outputs": [8]}]})";

TEST(MincutBans, ComputeBoundOpsAreNotRecomputedUnlessAllowed) {
  const Graph g = testing::graph_from_json(kLinearRelu);
  const SolveResult banned = solve_mincut(g);
  EXPECT_EQ(count_runs(g, banned.plan.sequence, "linear"), 1);
  // Without the ban, x (needed anyway) and the tiny w are cheaper to keep than h or r.
  const SolveResult allowed = solve_mincut(g, {{"ban_compute", "false"}});
  EXPECT_EQ(saved_list(allowed), (std::vector<std::string>{"x", "w"}));
  EXPECT_EQ(count_runs(g, allowed.plan.sequence, "linear"), 2);
}

// x -> sum over features (s, 16x smaller) -> y = x * s; the backward reads x and s.
constexpr char kReduction[] = R"({"format": "remat-graph", "version": 1,
  "values": [{"id": 0, "name": "x", "size": 1600}, {"id": 1, "name": "s", "size": 100},
             {"id": 2, "name": "y", "size": 1600, "output": true}, {"id": 3, "name": "gy", "size": 1600},
             {"id": 4, "name": "gx", "size": 1600, "output": true}],
  "nodes": [{"id": 0, "name": "sum", "kind": "reduction", "phase": "forward", "cost": 1, "inputs": [0], "outputs": [1]},
            {"id": 1, "name": "scale", "kind": "pointwise", "phase": "forward", "cost": 1, "inputs": [0, 1], "outputs": [2]},
            {"id": 2, "name": "scale_backward", "kind": "pointwise", "phase": "backward", "cost": 1, "inputs": [3, 0, 1], "outputs": [4]}]})";

TEST(MincutBans, ShrinkingReductionsAreSavedUnlessAllowed) {
  const Graph g = testing::graph_from_json(kReduction);
  const JointAnalysis a = analyze_joint(g, MincutParams{});
  EXPECT_EQ(a.ban[*g.find_node("sum")], mincut::BanReason::kReduction);
  EXPECT_EQ(saved_list(solve_mincut(g)), (std::vector<std::string>{"x", "s"}));
  const SolveResult allowed = solve_mincut(g, {{"ban_reductions", "false"}});
  EXPECT_EQ(saved_list(allowed), std::vector<std::string>{"x"});
  EXPECT_EQ(count_runs(g, allowed.plan.sequence, "sum"), 2);
  // A ratio above 16 no longer counts this reduction as shrinking.
  EXPECT_EQ(saved_list(solve_mincut(g, {{"reduction_ratio", "32"}})),
            std::vector<std::string>{"x"});
}

// x (half precision) -> exp to float -> e -> loss; the backward feeds e to a compute node, which
// cannot fuse with exp.
constexpr char kUnfusible[] = R"({"format": "remat-graph", "version": 1,
  "values": [{"id": 0, "name": "x", "size": 500}, {"id": 1, "name": "e", "size": 1000},
             {"id": 2, "name": "loss", "size": 4, "output": true}, {"id": 3, "name": "g", "size": 1000},
             {"id": 4, "name": "gx", "size": 1000, "output": true}],
  "nodes": [{"id": 0, "name": "exp", "kind": "pointwise", "phase": "forward", "cost": 1, "inputs": [0], "outputs": [1]},
            {"id": 1, "name": "sum", "kind": "reduction", "phase": "forward", "cost": 1, "inputs": [1], "outputs": [2]},
            {"id": 2, "name": "matmul_backward", "kind": "compute", "phase": "backward", "cost": 1, "inputs": [3, 1], "outputs": [4]}]})";

TEST(MincutBans, NodesNotFusibleWithABackwardUserAreSaved) {
  const Graph g = testing::graph_from_json(kUnfusible);
  const JointAnalysis a = analyze_joint(g, MincutParams{});
  EXPECT_EQ(a.ban[*g.find_node("exp")], mincut::BanReason::kUnfusible);
  EXPECT_EQ(saved_list(solve_mincut(g)), std::vector<std::string>{"e"});
  // Allowed, the smaller input wins (500 x 1.1^2 against 1000 x 1.1) and exp runs again, although
  // the backward must then materialise e anyway (Lemma 3.1: no traffic is saved).
  const SolveResult allowed = solve_mincut(g, {{"ban_unfusible", "false"}});
  EXPECT_EQ(saved_list(allowed), std::vector<std::string>{"x"});
  EXPECT_EQ(count_runs(g, allowed.plan.sequence, "exp"), 2);
}

// x (big input) -> sum (4x smaller, banned) -> A -> neg -> B -> output; the backward reads B only.
constexpr char kReweight[] = R"({"format": "remat-graph", "version": 1,
  "values": [{"id": 0, "name": "x", "size": 4000}, {"id": 1, "name": "A", "size": 1000},
             {"id": 2, "name": "B", "size": 1000}, {"id": 3, "name": "y", "size": 4, "output": true},
             {"id": 4, "name": "g", "size": 1000}, {"id": 5, "name": "gB", "size": 1000, "output": true}],
  "nodes": [{"id": 0, "name": "sum", "kind": "reduction", "phase": "forward", "cost": 1, "inputs": [0], "outputs": [1]},
            {"id": 1, "name": "neg", "kind": "pointwise", "phase": "forward", "cost": 1, "inputs": [1], "outputs": [2]},
            {"id": 2, "name": "mean", "kind": "reduction", "phase": "forward", "cost": 1, "inputs": [2], "outputs": [3]},
            {"id": 3, "name": "use_B", "kind": "pointwise", "phase": "backward", "cost": 1, "inputs": [4, 2], "outputs": [5]}]})";

TEST(MincutReweight, PrefersTheValueClosestToTheBackward) {
  // §3.4: A and B have the same size and B is computable from A; only B is needed, so save B.
  const Graph g = testing::graph_from_json(kReweight);
  const JointAnalysis a = analyze_joint(g, MincutParams{});
  EXPECT_EQ(a.distance[*g.find_value("B")], 1);
  EXPECT_EQ(a.distance[*g.find_value("A")], 2);
  EXPECT_EQ(saved_list(solve_mincut(g)), std::vector<std::string>{"B"});
  const JointAnalysis flat = analyze_joint(g, MincutParams{.reweight = false});
  EXPECT_EQ(flat.capacity[*g.find_value("A")], flat.capacity[*g.find_value("B")]);
}

TEST(MincutInput, GraphWithoutPhasesIsRefused) {
  const Graph g = read_graph_file(std::string(REMAT_SOURCE_DIR) + "/tests/data/late_use.json");
  const std::string message = input_error_of([&] { solve_mincut(g); });
  EXPECT_NE(message.find("have no phase"), std::string::npos) << message;
  EXPECT_NE(message.find("joint training graph"), std::string::npos) << message;
}

TEST(MincutInput, ForwardNodeReadingABackwardValueIsRefused) {
  const Graph g = testing::graph_from_json(R"({"format": "remat-graph", "version": 1,
    "values": [{"id": 0, "name": "seed", "size": 1}, {"id": 1, "name": "g", "size": 1},
               {"id": 2, "name": "f", "size": 1, "output": true}],
    "nodes": [{"id": 0, "name": "grad", "phase": "backward", "cost": 1, "inputs": [0], "outputs": [1]},
              {"id": 1, "name": "fwd", "phase": "forward", "cost": 1, "inputs": [1], "outputs": [2]}]})");
  const std::string message = input_error_of([&] { solve_mincut(g); });
  EXPECT_NE(message.find("node 1 ('fwd') reads value 1 ('g')"), std::string::npos) << message;
}

TEST(MincutInput, BadParametersNameTheKey) {
  const Graph g = example("f1");
  std::string message = input_error_of([&] { solve_mincut(g, {{"objectiv", "memory"}}); });
  EXPECT_NE(message.find("unknown parameter 'objectiv' (known: objective,"), std::string::npos)
      << message;
  message = input_error_of([&] { solve_mincut(g, {{"objective", "speed"}}); });
  EXPECT_NE(message.find("invalid value 'speed' for parameter 'objective' (expected runtime or "
                         "memory)"),
            std::string::npos)
      << message;
  message = input_error_of([&] { solve_mincut(g, {{"reduction_ratio", "0.5"}}); });
  EXPECT_NE(message.find("reduction_ratio"), std::string::npos) << message;
  message = input_error_of([&] { solve_mincut(g, {{"max_flow", "dinic"}}); });
  EXPECT_NE(message.find("expected bk or push_relabel"), std::string::npos) << message;
}

TEST(MincutSolve, PlanListsSavedValuesBytesAndRecomputedNodes) {
  const Graph g = example("f1");
  const SolveResult r = solve_mincut(g);
  EXPECT_EQ(r.plan.stats.counter("saved_values"), 1);
  EXPECT_EQ(r.plan.stats.counter("saved_bytes"), 1000);
  ASSERT_EQ(r.plan.stats.series.size(), 1u);
  EXPECT_EQ(r.plan.stats.series[0].second, std::vector<double>{1000});
  EXPECT_EQ(r.plan.stats.counter("recomputed_nodes"), 1);
  bool found = false;
  for (const auto& [key, list] : r.plan.stats.lists)
    if (key == "recomputed") found = list == std::vector<std::string>{"cos1"};
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace remat
