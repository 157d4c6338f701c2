// Two-pass plans (src/solvers/auto/two_pass.h): which outputs can wait, the first pass's floor
// estimate, the fewest deferrals that bring it within a budget, and a second pass the simulator
// accepts; then `auto` on a traced ResNet-18 at 50 %, where no one-pass plan fits and the two-pass
// one does.
#include "auto/two_pass.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "remat/io.h"
#include "remat/simulate.h"
#include "testing/testing.h"

namespace remat::auto_solver {
namespace {

using remat::testing::count_runs;
using remat::testing::solve_and_check;

// A 4-layer CNN-shaped training step: activations shrink (a1 100 .. a4 10 bytes) while weights
// grow (w1 1 .. w4 60), so the weight gradients made first in the backward (dw4, dw3) are
// resident when the first layers' backward needs room. t4 is a view of dw4, itself an output.
Graph toy_cnn(bool f1_recomputable = true) {
  GraphSpec spec;
  auto value = [&](std::string name, int64_t size, bool output = false) {
    spec.values.push_back({.name = std::move(name), .size_bytes = size, .is_output = output});
    return ValueId{static_cast<int32_t>(spec.values.size() - 1)};
  };
  auto node = [&](std::string name, std::vector<ValueId> in, std::vector<ValueId> out,
                  Phase phase) {
    spec.nodes.push_back({.name = std::move(name),
                          .cost = 10,
                          .inputs = std::move(in),
                          .outputs = std::move(out),
                          .phase = phase});
  };
  const int64_t act[] = {10, 100, 50, 20, 10}, weight[] = {0, 1, 10, 30, 60};
  std::vector<ValueId> a = {value("x", act[0])}, w = {kNoValue}, g(5), dw(5);
  for (int i = 1; i <= 4; ++i) w.push_back(value(fmt::format("w{}", i), weight[i]));
  for (int i = 1; i <= 4; ++i) a.push_back(value(fmt::format("a{}", i), act[i]));
  const ValueId loss = value("loss", 1, true);
  for (int i = 4; i >= 1; --i) g[i] = value(fmt::format("g{}", i), act[i]);
  for (int i = 4; i >= 1; --i) dw[i] = value(fmt::format("dw{}", i), weight[i], true);
  const ValueId dw4_t = value("dw4_t", 0, true);
  spec.values.back().alias_of = dw[4];
  for (int i = 1; i <= 4; ++i)
    node(fmt::format("f{}", i), {a[i - 1], w[i]}, {a[i]}, Phase::kForward);
  spec.nodes[0].recomputable = f1_recomputable;
  node("loss", {a[4]}, {loss}, Phase::kForward);
  node("dloss", {loss, a[4]}, {g[4]}, Phase::kBackward);
  for (int i = 4; i >= 1; --i) {
    node(fmt::format("wgrad{}", i), {a[i - 1], g[i]}, {dw[i]}, Phase::kBackward);
    if (i == 4) node("t4", {dw[4]}, {dw4_t}, Phase::kBackward);
    if (i > 1)
      node(fmt::format("igrad{}", i), {g[i], w[i], a[i - 1]}, {g[i - 1]}, Phase::kBackward);
  }
  return Graph::build(std::move(spec), "toy cnn");
}

std::vector<std::string> names(const Graph& g, std::span<const NodeId> nodes) {
  std::vector<std::string> out;
  for (NodeId n : nodes) out.push_back(g.node(n).name);
  return out;
}

TEST(TwoPass, DeferrableOutputsAreTheWeightGradientsAndTheirViews) {
  const Graph g = toy_cnn();
  EXPECT_EQ(names(g, deferrable_outputs(g)),
            (std::vector<std::string>{"wgrad4", "t4", "wgrad3", "wgrad2", "wgrad1"}));
}

TEST(TwoPass, FloorEstimateCountsTheOutputsMadeBefore) {
  const Graph g = toy_cnn();
  // At igrad2 (g2, a1 -> g1): weights and x 111, outputs made 101 (loss, dw4, dw3, dw2), g2 50,
  // a1 100, g1 100.
  EXPECT_EQ(estimate_first_pass_floor(g, {}), 462);
  // Without dw4 (and its view) and dw3 there: 462 - 90.
  const std::vector<NodeId> deferred = {*g.find_node("wgrad4"), *g.find_node("t4"),
                                        *g.find_node("wgrad3")};
  EXPECT_EQ(estimate_first_pass_floor(g, deferred), 372);
  EXPECT_GE(estimate_first_pass_floor(g, deferred), memory_lower_bound(g));
}

std::vector<std::string> value_names(const Graph& g, std::span<const ValueId> values) {
  std::vector<std::string> out;
  for (ValueId v : values) out.push_back(g.value(v).name);
  return out;
}

TEST(TwoPass, DefersTheFewestOutputsThatBringTheFloorWithinBudget) {
  const Graph g = toy_cnn();
  // dw4 alone (with its view, which reads it) leaves 402 > 400; dw4 and dw3 give 372. At 372
  // there is no room to keep anything for the second pass.
  const std::optional<DeferredOutputs> d = defer_outputs(g, 372);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(names(g, d->deferred), (std::vector<std::string>{"wgrad4", "t4", "wgrad3"}));
  EXPECT_TRUE(d->kept.empty());
  EXPECT_EQ(d->first_pass_floor, 372);
  EXPECT_EQ(d->first_pass.num_nodes(), g.num_nodes() - 3);
  EXPECT_EQ(d->first_pass.num_values(), g.num_values() - 3);
  EXPECT_FALSE(d->first_pass.find_node("wgrad4").has_value());
  // Not needed (the floor already fits) and not enough (deferring all leaves the lower bound).
  EXPECT_FALSE(defer_outputs(g, 462).has_value());
  EXPECT_FALSE(defer_outputs(g, memory_lower_bound(g) - 1).has_value());
}

// With room left under the budget, the first pass keeps for the second what costs less to hold
// than to make again: g4 (10 bytes) spares the second pass f4 and dloss; at 430, a3 and g3 too
// spare it f3 and igrad4.
TEST(TwoPass, FirstPassKeepsWhatTheSecondWouldRecomputeWhereThereIsRoom) {
  const Graph g = toy_cnn();
  const std::optional<DeferredOutputs> d = defer_outputs(g, 400);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(value_names(g, d->kept), std::vector<std::string>{"g4"});
  EXPECT_EQ(d->first_pass_floor, 382);
  EXPECT_EQ(d->second_pass_rerun_cost, 40);
  EXPECT_TRUE(d->first_pass.value(*d->first_pass.find_value("g4")).is_output);
  const std::optional<DeferredOutputs> roomier = defer_outputs(g, 430);
  ASSERT_TRUE(roomier.has_value());
  EXPECT_EQ(value_names(g, roomier->kept), (std::vector<std::string>{"a3", "g4", "g3"}));
  EXPECT_LE(roomier->first_pass_floor, 430);
  EXPECT_EQ(roomier->second_pass_rerun_cost, 20);
}

TEST(TwoPass, SecondPassRecomputesWhatTheDeferredOutputsNeed) {
  const Graph g = toy_cnn();
  for (const int64_t budget : {372, 400}) {
    const std::optional<DeferredOutputs> d = defer_outputs(g, budget);
    ASSERT_TRUE(d.has_value());
    const Sequence plan = two_pass_sequence(g, *d, default_schedule(d->first_pass));
    const Evaluation e = simulate(g, plan);
    ASSERT_TRUE(e.valid) << e.error;
    EXPECT_LE(e.peak_bytes, budget);
    // The first pass as given, then what dw4 and dw3 need that it did not leave resident (the
    // loss is an output, so dloss reads it from the first pass; at 400, g4 is kept), in the
    // default order.
    const std::vector<std::string> second_pass =
        budget == 372
            ? std::vector<std::string>{"f1",     "f2", "f3",     "f4",    "dloss",
                                       "wgrad4", "t4", "igrad4", "wgrad3"}
            : std::vector<std::string>{"f1", "f2", "f3", "wgrad4", "t4", "igrad4", "wgrad3"};
    EXPECT_EQ(names(g, std::span(plan).subspan(static_cast<size_t>(d->first_pass.num_nodes()))),
              second_pass);
    EXPECT_EQ(count_runs(g, plan, "loss"), 1);
    EXPECT_EQ(count_runs(g, plan, "wgrad4"), 1);
    EXPECT_EQ(count_runs(g, plan, "dloss"), budget == 372 ? 2 : 1);
  }
}

TEST(TwoPass, ANonRecomputableValueIsKeptFromItsOneRun) {
  const Graph g = toy_cnn(/*f1_recomputable=*/false);
  const std::optional<DeferredOutputs> d = defer_outputs(g, 400);
  ASSERT_TRUE(d.has_value());
  const Sequence plan = two_pass_sequence(g, *d, default_schedule(d->first_pass));
  const Evaluation e = simulate(g, plan);
  ASSERT_TRUE(e.valid) << e.error;
  EXPECT_EQ(count_runs(g, plan, "f1"), 1);
  // Keeping a2 (50 bytes) for wgrad3 holds less than keeping a1 (100) to make a2 again.
  EXPECT_EQ(value_names(g, d->kept), std::vector<std::string>{"a2"});
  EXPECT_EQ(count_runs(g, plan, "f2"), 1);
}

// Nodes that cost more per byte they make than the graph on average (140 / 574 bytes) run once
// in the pinned copy: those making fewer than 41 bytes, and t4 (a view, 0 bytes).
TEST(TwoPass, PinnedFirstPassRunsTheDearNodesOnce) {
  const Graph g = toy_cnn();
  const Graph pinned = pin_dear_nodes(g);
  ASSERT_EQ(pinned.num_nodes(), g.num_nodes());
  ASSERT_EQ(pinned.num_values(), g.num_values());
  std::vector<std::string> recomputable;
  for (int32_t n = 0; n < g.num_nodes(); ++n) {
    EXPECT_EQ(pinned.node(NodeId{n}).name, g.node(NodeId{n}).name);
    if (pinned.node(NodeId{n}).recomputable) recomputable.push_back(g.node(NodeId{n}).name);
  }
  EXPECT_EQ(recomputable, (std::vector<std::string>{"f1", "f2", "wgrad4", "igrad3", "igrad2"}));
  // A plan of the pinned copy is a plan of the graph, with the same figures.
  const Evaluation on_pinned = simulate(pinned, default_schedule(pinned));
  const Evaluation on_graph = simulate(g, default_schedule(pinned));
  ASSERT_TRUE(on_graph.valid) << on_graph.error;
  EXPECT_EQ(on_graph.peak_bytes, on_pinned.peak_bytes);
  EXPECT_EQ(on_graph.cost, on_pinned.cost);
  // defer_outputs gives both.
  const std::optional<DeferredOutputs> d = defer_outputs(g, 400);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->first_pass_pinned.num_nodes(), d->first_pass.num_nodes());
}

// The second pass runs again what the first pass left behind; where the budget has room, the
// plan holds some of it across the boundary instead. The first pass's last steps (wgrad1,
// igrad2) read a1, so at 372 and 400 the second pass reads it from there instead of running f1
// again; at 440 the first pass keeps a3 and g3, and the second pass runs only the deferred nodes.
TEST(TwoPass, DropsSecondPassRerunsTheBudgetDoesNotNeed) {
  const Graph g = toy_cnn();
  const std::vector<std::pair<int64_t, std::vector<std::string>>> cases = {
      {372, {"f2", "f3", "f4", "dloss", "wgrad4", "t4", "igrad4", "wgrad3"}},
      {400, {"f2", "f3", "wgrad4", "t4", "igrad4", "wgrad3"}},
      {440, {"wgrad4", "t4"}}};
  for (const auto& [budget, second_pass] : cases) {
    const std::optional<DeferredOutputs> d = defer_outputs(g, budget);
    ASSERT_TRUE(d.has_value());
    const size_t first = static_cast<size_t>(d->first_pass.num_nodes());
    const Sequence plan = two_pass_sequence(g, *d, default_schedule(d->first_pass));
    const Sequence trimmed = drop_second_pass_reruns(g, plan, first, budget);
    const Evaluation e = simulate(g, trimmed);
    ASSERT_TRUE(e.valid) << e.error;
    EXPECT_LE(e.peak_bytes, budget);
    EXPECT_TRUE(
        std::equal(plan.begin(), plan.begin() + static_cast<ptrdiff_t>(first), trimmed.begin()));
    EXPECT_EQ(names(g, std::span(trimmed).subspan(first)), second_pass) << budget;
    EXPECT_EQ(count_runs(g, trimmed, "f1"), 1);
  }
}

// The traced ResNet-18 of bench/models_bench.py (batch 32, 128 px): at 50 % only 1.8 MB is free
// at the stem's batch-norm backward, where one-pass plans hold weight gradients (FastSA: 56.3 %).
TEST(TwoPass, AutoFitsResNet18AtHalfItsPeakOnlyWithTwoPasses) {
  const Graph g =
      read_graph_file(std::string(REMAT_SOURCE_DIR) + "/tests/data/resnet18_b32_i128.json");
  const int64_t budget = baseline(g).peak_bytes / 2;
  ASSERT_GE(budget, memory_lower_bound(g));
  const ParamMap quick = {{"members", "none,fastsa"}, {"fastsa.iterations_scale", "0.05"}};
  ParamMap one_pass = quick;
  one_pass["two_pass"] = "false";
  // Five work units: at one, auto's polish of the two-pass plan is the winner.
  const double work = 5;
  const SolveResult without = solve_and_check(g, budget, "auto", one_pass, 1, work);
  EXPECT_GT(without.eval.peak_bytes, budget);
  const SolveResult with = solve_and_check(g, budget, "auto", quick, 1, work);
  EXPECT_LE(with.eval.peak_bytes, budget);
  const auto winner = std::find_if(with.plan.stats.lists.begin(), with.plan.stats.lists.end(),
                                   [](const auto& list) { return list.first == "auto_winner"; });
  ASSERT_NE(winner, with.plan.stats.lists.end());
  EXPECT_EQ(winner->second, std::vector<std::string>{"fastsa_two_pass"});
  EXPECT_GT(*with.plan.stats.counter("fastsa_two_pass_deferred_outputs"), 0);
  // The first pass's cost falls into a few levels by seed: where its runs converge within their
  // share, it tries five seeds.
  EXPECT_EQ(with.plan.stats.counter("fastsa_two_pass_first_pass_tries"), 5);
}

// Time given is time used where only a two-pass plan fits: the anytime rounds plan the two
// passes again with new seeds (besides restarts from the best plan), and the plan still fits.
TEST(TwoPass, AnytimeRoundsPlanTheTwoPassesAgain) {
  const Graph g =
      read_graph_file(std::string(REMAT_SOURCE_DIR) + "/tests/data/resnet18_b32_i128.json");
  const int64_t budget = baseline(g).peak_bytes / 2;
  const ParamMap params = {
      {"members", "none,fastsa"}, {"fastsa.iterations_scale", "0.05"}, {"anytime", "true"}};
  const SolveResult r = solve_and_check(g, budget, "auto", params, 1, 1.3);
  EXPECT_LE(r.eval.peak_bytes, budget);
  const std::optional<double> rounds = r.plan.stats.counter("fastsa_improve_two_pass_rounds");
  ASSERT_TRUE(rounds.has_value());
  EXPECT_GE(*rounds, 1);
}

}  // namespace
}  // namespace remat::auto_solver
