// The greedy solver: its pricing of a recomputation equals the simulator's replay of it, round
// after round; its plans are valid, lower the peak, never rerun a non-recomputable node, are the
// same on every run, and stop on the work limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "greedy/recomputations.h"
#include "remat/generate.h"
#include "remat/io.h"
#include "remat/simulate.h"
#include "testing/generated_joint.h"
#include "testing/testing.h"

namespace remat {
namespace {

using greedy::find_moves;
using greedy::InsertionPricer;
using greedy::Moves;
using testing::generated_joint;

Sequence with_chain(const Sequence& sequence, std::span<const NodeId> chain, int32_t at) {
  Sequence out = sequence;
  out.insert(out.begin() + at, chain.begin(), chain.end());
  return out;
}

// Checks, for `rounds` rounds, that the pricer gives every move of `g` the simulator's peak of
// the schedule with the move applied; each round then applies one move (a varying one), so later
// rounds price insertions into schedules that already recompute (values made twice, chains
// reading the copies of earlier chains).
void expect_pricing_as_the_simulator(const Graph& g, size_t rounds) {
  Sequence sequence = default_schedule(g);
  const Moves moves = find_moves(g, sequence, 4);
  ASSERT_FALSE(moves.moves.empty()) << g.name();
  InsertionPricer pricer(g);
  for (size_t round = 0; round < rounds; ++round) {
    pricer.index(sequence, simulate(g, sequence, {.timeline = true}).timeline);
    std::vector<std::pair<size_t, int32_t>> priced;
    for (size_t k = 0; k < moves.moves.size(); ++k) {
      const greedy::Move& move = moves.moves[k];
      const int32_t at = pricer.first_read_of(move.step, moves.backward_begin + 1);
      ASSERT_GT(at, moves.backward_begin);
      const std::optional<int64_t> peak = pricer.peak_with(move.chain, at);
      const Evaluation e = simulate(g, with_chain(sequence, move.chain, at));
      ASSERT_EQ(peak.has_value(), e.valid) << g.describe(move.step) << ": " << e.error;
      if (peak) {
        EXPECT_EQ(*peak, e.peak_bytes)
            << g.name() << ", round " << round << ", " << g.describe(move.step);
        priced.emplace_back(k, at);
      }
    }
    ASSERT_FALSE(priced.empty());
    const auto [k, at] = priced[(round * 7) % priced.size()];
    sequence = with_chain(sequence, moves.moves[k].chain, at);
  }
}

class GreedyPricer : public ::testing::TestWithParam<uint64_t> {};

TEST_P(GreedyPricer, PricesEveryMoveAsTheSimulatorReplaysIt) {
  expect_pricing_as_the_simulator(generated_joint(120, GetParam()), 6);
}

INSTANTIATE_TEST_SUITE_P(Seeds, GreedyPricer, ::testing::Values(1, 2, 3, 4));

// Other tracers' joint graphs (AOTAutograd, make_fx, Hugging Face models): fused nodes with
// several outputs, views, values the chain reads from their first copy and then makes again.
TEST(GreedyPricer, PricesEveryMoveOfTracedModelsAsTheSimulatorReplaysIt) {
  for (const char* name : {"hf_gpt2", "hf_llama", "gpt4_aot", "llama4_make_fx"})
    expect_pricing_as_the_simulator(
        read_graph_file(std::string(REMAT_SOURCE_DIR) + "/tests/data/blocks/" + name + ".json"), 4);
}

TEST(GreedyMoves, ChainsRecomputableForwardStepsBeforeTheStepTheyFeed) {
  const Graph g = generated_joint(200, 5);
  const Sequence sequence = default_schedule(g);
  const Moves moves = find_moves(g, sequence, 4);
  for (const greedy::Move& move : moves.moves) {
    EXPECT_EQ(move.chain.back(), move.step);
    for (size_t i = 0; i < move.chain.size(); ++i) {
      const NodeId n = move.chain[i];
      EXPECT_TRUE(g.node(n).recomputable) << g.describe(n);
      EXPECT_EQ(g.node(n).phase, Phase::kForward) << g.describe(n);
      EXPECT_EQ(std::count(move.chain.begin(), move.chain.end(), n), 1) << g.describe(n);
    }
  }
  EXPECT_TRUE(find_moves(g, sequence, 0).moves.size() == moves.moves.size());
  for (const greedy::Move& move : find_moves(g, sequence, 0).moves)
    EXPECT_EQ(move.chain.size(), 1u);
}

// `fraction` of the default schedule's peak, or the memory lower bound when that is higher.
int64_t budget_at(const Graph& g, double fraction) {
  return std::max(memory_lower_bound(g),
                  static_cast<int64_t>(fraction * static_cast<double>(baseline(g).peak_bytes)));
}

TEST(Greedy, LowersThePeakWithAValidPlanThatRerunsOnlyRecomputableNodes) {
  for (uint64_t seed : {1, 2, 3}) {
    const Graph g = generated_joint(300, seed);
    const SolveResult r = testing::solve_and_check(g, budget_at(g, 0.6), "greedy");
    EXPECT_LT(r.eval.peak_bytes, baseline(g).peak_bytes) << "seed " << seed;
    EXPECT_GT(r.plan.stats.counter("recomputations").value_or(0), 0);
    std::vector<int> runs(static_cast<size_t>(g.num_nodes()), 0);
    for (NodeId n : r.plan.sequence) ++runs[static_cast<size_t>(n.value())];
    for (int32_t n = 0; n < g.num_nodes(); ++n)
      if (!g.node(NodeId{n}).recomputable) {
        EXPECT_EQ(runs[static_cast<size_t>(n)], 1) << g.describe(NodeId{n});
      }
  }
}

TEST(Greedy, KeepsTheDefaultScheduleWhenItFits) {
  const Graph g = generated_joint(200, 1);
  const SolveResult r = testing::solve_and_check(g, baseline(g).peak_bytes, "greedy");
  EXPECT_EQ(r.plan.sequence, default_schedule(g));
}

TEST(Greedy, RecomputesTheStepGivingMostMemoryPerCost) {
  // a (cheap to make) and b (dear) are both read by the backward: making a again before its
  // backward reader lowers the peak as much as making b again, at a thousandth of the cost.
  GraphSpec spec;
  for (auto [name, size] : {std::pair{"x", 1},
                            {"a", 100},
                            {"b", 100},
                            {"loss", 1},
                            {"start", 0},
                            {"grad_b", 100},
                            {"grad_a", 1}})
    spec.values.push_back({.name = name, .size_bytes = size});
  spec.values.back().is_output = true;
  auto node = [&](const char* name, double cost, std::vector<int32_t> inputs, int32_t output,
                  Phase phase, bool recomputable = true) {
    Node n{.name = name,
           .cost = cost,
           .outputs = {ValueId{output}},
           .phase = phase,
           .recomputable = recomputable};
    for (int32_t v : inputs) n.inputs.push_back(ValueId{v});
    spec.nodes.push_back(std::move(n));
  };
  node("make_a", 1, {0}, 1, Phase::kForward);
  node("make_b", 1000, {1}, 2, Phase::kForward);
  node("loss", 1, {2}, 3, Phase::kForward, false);
  node("start", 0, {3}, 4, Phase::kBackward, false);
  node("grad_b", 1, {2, 4}, 5, Phase::kBackward);
  node("grad_a", 1, {1, 5}, 6, Phase::kBackward);
  const Graph g = Graph::build(std::move(spec), "test");
  const Baseline base = baseline(g);
  const SolveResult r = testing::solve_and_check(g, base.peak_bytes - 1, "greedy");
  EXPECT_EQ(r.plan.sequence, (Sequence{NodeId{0}, NodeId{1}, NodeId{2}, NodeId{3}, NodeId{4},
                                       NodeId{0}, NodeId{5}}));
  EXPECT_EQ(r.eval.peak_bytes, base.peak_bytes - 99);
  EXPECT_EQ(r.eval.cost, base.cost + 1);
}

TEST(Greedy, GivesTheSamePlanOnEveryRun) {
  const Graph g = generated_joint(400, 7);
  testing::expect_same_plan_on_every_run(g, budget_at(g, 0.5), "greedy");
}

TEST(Greedy, StopsOnTheWorkLimitWithinIt) {
  const Graph g = generated_joint(400, 7);
  const SolveResult full = testing::solve_and_check(g, budget_at(g, 0.3), "greedy");
  const double rounds = full.plan.stats.counter("recomputations").value_or(0);
  ASSERT_GT(rounds, 2);
  const double limit = full.plan.stats.work / 3;
  const SolveResult cut = testing::solve_and_check(g, budget_at(g, 0.3), "greedy", {}, 1, limit);
  EXPECT_EQ(cut.plan.stats.stop_reason, StopReason::kWorkLimit);
  EXPECT_LE(cut.plan.stats.work, limit);
  EXPECT_LT(cut.plan.stats.counter("recomputations").value_or(0), rounds);
  EXPECT_LT(cut.eval.peak_bytes, baseline(g).peak_bytes);
  // The rounds it ran are the full run's first rounds.
  const SolveResult again = testing::solve_and_check(g, budget_at(g, 0.3), "greedy", {}, 1, limit);
  EXPECT_EQ(cut.plan.sequence, again.plan.sequence);
}

TEST(Greedy, RefusesAGraphWithoutPhases) {
  const Graph g = generate_random_layered({.num_nodes = 20, .seed = 1});
  EXPECT_NE(testing::error_of<UnsupportedGraph>([&] { solve(g, "greedy", SolveOptions{}); }),
            "no error");
}

}  // namespace
}  // namespace remat
