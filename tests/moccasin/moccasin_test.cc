// Tests of the `moccasin` solver: the Fig. 3 example, hand-computed C_v = 1 vs C_v = 2 optima,
// agreement with brute force over the staged event space, validity and determinism.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "moccasin/incumbent.h"
#include "moccasin/instance.h"
#include "remat/generate.h"
#include "remat/graph.h"
#include "remat/io.h"
#include "remat/registry.h"
#include "remat/simulate.h"
#include "testing/testing.h"

namespace remat {
namespace {

// Chain a -> b -> c -> d plus the skip a -> d (the graph that fits the text of [M] Fig. 3).
Graph fig3_graph(int64_t size_b) {
  GraphSpec spec;
  spec.values = {{"a", 1}, {"b", size_b}, {"c", 1}, {"d", 1, true}};
  spec.nodes = {
      {.name = "a", .cost = 1, .outputs = {ValueId{0}}},
      {.name = "b", .cost = 1, .inputs = {ValueId{0}}, .outputs = {ValueId{1}}},
      {.name = "c", .cost = 1, .inputs = {ValueId{1}}, .outputs = {ValueId{2}}},
      {.name = "d", .cost = 1, .inputs = {ValueId{2}, ValueId{0}}, .outputs = {ValueId{3}}}};
  return Graph::build(std::move(spec), "fig3");
}

TEST(Moccasin, Fig3EventsAndMemory) {
  // First computations at events 1, 3, 6, 10; node a's recomputation in stage 4 is event 7.
  EXPECT_EQ(moccasin::first_event(0), 1);
  EXPECT_EQ(moccasin::first_event(1), 3);
  EXPECT_EQ(moccasin::first_event(2), 6);
  EXPECT_EQ(moccasin::first_event(3), 10);
  EXPECT_EQ(moccasin::staged_event(4, 0), 7);
  // The Fig. 3 plan with unit sizes: memory 2 at event 7 (a and c), peak 3 at event 10.
  const Graph g = fig3_graph(1);
  const Sequence fig3 = {NodeId{0}, NodeId{1}, NodeId{2}, NodeId{0}, NodeId{3}};
  const Evaluation e = simulate(g, fig3, {.timeline = true});
  ASSERT_TRUE(e.valid) << e.error;
  EXPECT_EQ(e.timeline[3], 2);
  EXPECT_EQ(e.peak_bytes, 3);
  // With unit sizes the solver needs no recomputation at budget 3: cost 4, peak 3, optimal.
  const SolveResult r = testing::solve_and_check(g, 3, "moccasin");
  EXPECT_EQ(r.plan.stats.status, SolveStatus::kOptimal);
  EXPECT_EQ(r.eval.cost, 4);
  EXPECT_EQ(r.eval.peak_bytes, 3);
}

TEST(Moccasin, OneCopyForcesHigherPeakThanTwo) {
  // b is large (10). Keeping a across b and c costs a+b+c = 12 at c; recomputing a after c
  // (event 7) gives peak a+b = b+c = 11 at cost 5 (hand computation).
  // warm=none: a warm start's recomputations would raise C_v to 2 (see PlanAsIncumbent).
  const Graph g = fig3_graph(10);
  const SolveResult one =
      testing::solve_and_check(g, 11, "moccasin", {{"c", "1"}, {"warm", "none"}});
  EXPECT_EQ(one.plan.stats.status, SolveStatus::kOverBudget);
  EXPECT_EQ(one.eval.peak_bytes, 12);
  const SolveResult two = testing::solve_and_check(g, 11, "moccasin", {{"c", "2"}});
  EXPECT_EQ(two.plan.stats.status, SolveStatus::kOptimal);
  EXPECT_EQ(two.eval.peak_bytes, 11);
  EXPECT_EQ(two.eval.cost, 5);
  EXPECT_EQ(testing::count_runs(g, two.plan.sequence, "a"), 2);
  // At budget 12 no recomputation is needed.
  const SolveResult loose = testing::solve_and_check(g, 12, "moccasin");
  EXPECT_EQ(loose.plan.stats.status, SolveStatus::kOptimal);
  EXPECT_EQ(loose.eval.cost, 4);
}

Graph random_graph(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  GraphSpec spec;
  for (int i = 0; i < n; ++i) {
    spec.values.push_back(
        {fmt::format("v{}", i), std::uniform_int_distribution<int>(1, 6)(rng), i == n - 1});
    Node node{.name = fmt::format("n{}", i),
              .cost = static_cast<double>(std::uniform_int_distribution<int>(1, 4)(rng)),
              .outputs = {ValueId{i}}};
    if (i > 0) {
      node.inputs.push_back(ValueId{i - 1});
      const int extra = std::uniform_int_distribution<int>(0, i - 1)(rng);
      if (extra != i - 1 && rng() % 2 == 0) node.inputs.push_back(ValueId{extra});
    }
    spec.nodes.push_back(std::move(node));
  }
  return Graph::build(std::move(spec), "random");
}

// Least cost over every subset of staged recomputation events (first computations fixed).
std::optional<double> brute_force(const Graph& g, int64_t budget) {
  const int n = g.num_nodes();
  std::vector<std::pair<int, int>> optional_events;  // (event, node)
  std::vector<std::pair<int, int>> fixed_events;
  for (int p = 0; p < n; ++p) {
    fixed_events.emplace_back(moccasin::first_event(p), p);
    for (int stage = p + 2; stage <= n; ++stage)
      optional_events.emplace_back(moccasin::staged_event(stage, p), p);
  }
  std::optional<double> best;
  for (uint32_t mask = 0; mask < (1u << optional_events.size()); ++mask) {
    std::vector<std::pair<int, int>> events = fixed_events;
    for (size_t k = 0; k < optional_events.size(); ++k)
      if (mask >> k & 1) events.push_back(optional_events[k]);
    std::sort(events.begin(), events.end());
    Sequence seq;
    for (const auto& [event, node] : events) seq.push_back(NodeId{node});
    const Evaluation e = simulate(g, seq);
    if (e.valid && e.peak_bytes <= budget && (!best || e.cost < *best)) best = e.cost;
  }
  return best;
}

// Both without a start (the search alone proves the optimum, so assigning ends and links
// without alternatives loses no plan) and from the default warm start.
class MoccasinBruteForce : public ::testing::TestWithParam<const char*> {};

TEST_P(MoccasinBruteForce, AgreesOnSmallGraphs) {
  int proved = 0;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    const int n = 5 + static_cast<int>(seed % 2);
    const Graph g = random_graph(n, seed);
    const int64_t low = memory_lower_bound(g), high = baseline(g).peak_bytes;
    for (const int64_t budget : {low, (low + high) / 2, high}) {
      const std::optional<double> expected = brute_force(g, budget);
      const SolveResult r = testing::solve_and_check(
          g, budget, "moccasin", {{"c", std::to_string(n)}, {"warm", GetParam()}});
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " budget " << budget);
      if (!expected) {
        EXPECT_EQ(r.plan.stats.status, SolveStatus::kOverBudget);
        continue;
      }
      ASSERT_EQ(r.plan.stats.status, SolveStatus::kOptimal);
      EXPECT_EQ(r.eval.cost, *expected);
      ++proved;
    }
  }
  EXPECT_GT(proved, 20);
}

INSTANTIATE_TEST_SUITE_P(Warm, MoccasinBruteForce, ::testing::Values("none", "auto"));

// Fig. 3's graph as the model sees it (unit sizes, d a graph output, two copies each).
moccasin::Instance fig3_instance(bool staged) {
  moccasin::Instance inst;
  inst.staged = staged;
  inst.capacity = 3;
  const std::vector<std::vector<moccasin::Use>> uses = {{}, {{0, 0}}, {{1, 0}}, {{2, 0}, {0, 0}}};
  for (int p = 0; p < 4; ++p) {
    moccasin::NodeModel node;
    node.copies = staged ? std::min(2, 4 - p) : 2;
    node.weight = 1;
    node.outputs = {{1, p == 3}};
    node.uses = uses[static_cast<size_t>(p)];
    inst.nodes.push_back(node);
  }
  return inst;
}

TEST(Moccasin, PlanAsIncumbent) {
  const moccasin::Instance inst = fig3_instance(true);
  std::string why;
  // Fig. 3's plan: a, b, c, a again in stage 4, d. Events 1, 3, 6, 7, 10; a's first copy is
  // read by b (event 3) so it ends at 4; its second copy, b and c are read by d (10), so they end
  // at 11 like d (a graph output). Memory 2 at event 7, peak 3 at event 10.
  const std::optional<moccasin::Solution> fig3 =
      moccasin::to_solution(inst, {{0, 1, 2, 0, 3}}, why);
  ASSERT_TRUE(fig3) << why;
  EXPECT_EQ(fig3->copies[0][0].start, 1);
  EXPECT_EQ(fig3->copies[0][1].start, 7);
  EXPECT_TRUE(fig3->copies[0][1].active);
  EXPECT_EQ(fig3->copies[1][0].start, 3);
  EXPECT_FALSE(fig3->copies[1][1].active);
  EXPECT_EQ(fig3->copies[2][0].start, 6);
  EXPECT_EQ(fig3->copies[3][0].start, 10);
  // Ends per (node, copy, output): a 4 and 11, b 7 and its absent copy's start + 1, c 11, its
  // absent copy's start + 1, d 11.
  EXPECT_EQ(fig3->hint_ends, (std::vector<int>{4, 11, 7, moccasin::staged_event(4, 1) + 1, 11,
                                               moccasin::staged_event(4, 2) + 1, 11}));
  EXPECT_EQ(fig3->peak, 3);
  EXPECT_EQ(moccasin::model_cost(inst, *fig3), 5);
  // Plans the staged events cannot hold, each refused with its reason.
  EXPECT_FALSE(moccasin::to_solution(inst, {{0, 1, 2, 1, 0, 3}}, why));
  EXPECT_NE(why.find("not in node order"), std::string::npos) << why;
  EXPECT_FALSE(moccasin::to_solution(inst, {{0, 1, 2, 3, 2}}, why));
  EXPECT_NE(why.find("after the last node"), std::string::npos) << why;
  EXPECT_FALSE(moccasin::to_solution(inst, {{0, 2, 1, 3}}, why));
  EXPECT_NE(why.find("not in the node order"), std::string::npos) << why;
  EXPECT_FALSE(moccasin::to_solution(inst, {{0, 1, 0, 2, 0, 3}}, why));
  EXPECT_NE(why.find("copies"), std::string::npos) << why;
  // order=free: any sequence, one event per step (the same out-of-order stage is fine).
  const moccasin::Instance free = fig3_instance(false);
  const std::optional<moccasin::Solution> any =
      moccasin::to_solution(free, {{0, 1, 2, 1, 0, 3}}, why);
  ASSERT_TRUE(any) << why;
  EXPECT_EQ(any->copies[1][1].start, 4);
  EXPECT_EQ(any->copies[0][1].start, 5);
  EXPECT_EQ(moccasin::computations(4, {{0, 1, 2, 1, 0, 3}}), (std::vector<int32_t>{2, 2, 1, 1}));
  // The staged form: each gap's recomputations sorted by node, each node once; then it maps.
  EXPECT_EQ(moccasin::staged_form(4, {{0, 1, 2, 1, 0, 1, 3}}),
            (std::vector<int32_t>{0, 1, 2, 0, 1, 3}));
  EXPECT_TRUE(moccasin::to_solution(inst, moccasin::staged_form(4, {{0, 1, 2, 1, 0, 3}}), why));
  // First computations out of the node order: unchanged (and refused by to_solution).
  EXPECT_EQ(moccasin::staged_form(4, {{0, 2, 1, 3}}), (std::vector<int32_t>{0, 2, 1, 3}));
}

// MOCCASIN from a start plan (SolveOptions::start) never returns a worse plan, whether the
// start maps onto the staged events (checkmate-lp keeps the node order: it then becomes the
// first incumbent) or not (FastSA reorders: it is compared at the end).
TEST(Moccasin, NeverWorseThanItsStart) {
  std::vector<std::string> starters = {"fastsa"};
  for (const SolverEntry& e : solver_registry())
    if (e.name == "checkmate-lp") starters.push_back("checkmate-lp");
  int mapped = 0;
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const Graph g = random_graph(12, seed);
    const int64_t low = memory_lower_bound(g), high = baseline(g).peak_bytes;
    for (const int64_t budget : {low + (high - low) / 4, (low + high) / 2}) {
      for (const std::string& starter : starters) {
        SolveOptions options;
        options.budget = Budget{budget};
        options.time_limit_s = 1;
        const SolveResult start = solve(g, starter, options);
        options.start = start.plan.sequence;
        const SolveResult r = solve(g, "moccasin", options);
        SCOPED_TRACE(::testing::Message() << starter << " seed " << seed << " budget " << budget);
        EXPECT_FALSE(better_plan({start.eval.peak_bytes, start.eval.cost},
                                 {r.eval.peak_bytes, r.eval.cost}, budget));
        ASSERT_TRUE(r.plan.stats.counter("start_mapped"));
        if (*r.plan.stats.counter("start_mapped") == 1 && start.eval.peak_bytes <= budget) {
          // A mapped start within budget is phase 2's first incumbent.
          EXPECT_EQ(*r.plan.stats.counter("start_used"), 1);
          ++mapped;
        }
      }
    }
  }
  if (starters.size() > 1) {
    EXPECT_GE(mapped, 3);
  }
}

// The warm start by default, or the caller's start plan (SolveOptions::start, e.g. a plan file
// that `remat solve --start` read).
TEST(Moccasin, WarmStartOrAStartPlan) {
  const Graph g = fig3_graph(10);
  const SolveResult warm = testing::solve_and_check(g, 11, "moccasin");
  const auto& lists = warm.plan.stats.lists;
  ASSERT_FALSE(lists.empty());
  EXPECT_EQ(lists.back().first, "start");
  EXPECT_TRUE(lists.back().second.at(0).starts_with("checkmate-lp") ||
              lists.back().second.at(0).starts_with("fastsa"))
      << lists.back().second.at(0);
  const SolveResult none = testing::solve_and_check(g, 11, "moccasin", {{"warm", "none"}});
  EXPECT_EQ(none.plan.stats.lists.back().second, std::vector<std::string>{"none"});

  SolveOptions from_plan;
  from_plan.budget = Budget{11};
  from_plan.start = warm.plan.sequence;
  const SolveResult started = solve(g, "moccasin", from_plan);
  EXPECT_TRUE(started.plan.stats.lists.back().second.at(0).starts_with("start: "));
  EXPECT_EQ(started.eval.cost, 5);
  EXPECT_NE(testing::input_error_of([&] {
              testing::solve_and_check(g, 11, "moccasin", {{"warm", "rotor"}});
            }).find("warm"),
            std::string::npos);
}

TEST(Moccasin, FreeOrderNeverWorseThanFixed) {
  const Graph g = fig3_graph(10);
  const SolveResult fixed = testing::solve_and_check(g, 11, "moccasin");
  const SolveResult free = testing::solve_and_check(g, 11, "moccasin", {{"order", "free"}});
  EXPECT_EQ(free.plan.stats.status, SolveStatus::kOptimal);
  EXPECT_LE(free.eval.cost, fixed.eval.cost);
}

TEST(Moccasin, SameSeedOneThreadSamePlan) {
  const Graph g = random_graph(14, 7);
  const int64_t budget = (memory_lower_bound(g) + baseline(g).peak_bytes) / 2;
  const SolveResult a = testing::solve_and_check(g, budget, "moccasin", {}, 3);
  const SolveResult b = testing::solve_and_check(g, budget, "moccasin", {}, 3);
  EXPECT_EQ(a.plan.sequence, b.plan.sequence);
}

// A propagator run on a large model (a larger cumulative, a larger space to copy per search node)
// counts for more work, so a unit costs about the same CPU at any size
// (work_unit_bench --moccasin-sizes measures it); on a small model the rate stays the reference.
TEST(Moccasin, WorkUnitWeighsPropagationsByTheModelsTasks) {
  const Graph small = fig3_graph(10);
  const SolveResult fig3 = testing::solve_and_check(small, 11, "moccasin");
  EXPECT_EQ(fig3.plan.stats.counter("propagations_per_unit"), moccasin::kPropagationsPerUnit);

  const Graph large = generate_random_layered({.num_nodes = 500, .seed = 1});
  const int64_t budget = baseline(large).peak_bytes * 7 / 10;
  const SolveResult r =
      testing::solve_and_check(large, budget, "moccasin", {{"warm", "none"}}, 1, 0.5);
  const double tasks = r.plan.stats.counter("memory_tasks").value_or(0);
  ASSERT_GT(tasks, 4 * moccasin::kReferenceTasks);
  EXPECT_NEAR(r.plan.stats.counter("propagations_per_unit").value_or(0),
              moccasin::kPropagationsPerUnit / std::pow(tasks / moccasin::kReferenceTasks, 1.15),
              1.0);
  EXPECT_LE(r.plan.stats.work, 0.5 * 1.1);
}

TEST(Moccasin, RejectsBadParameters) {
  const Graph g = fig3_graph(1);
  EXPECT_NE(testing::input_error_of([&] {
              testing::solve_and_check(g, 3, "moccasin", {{"c", "0"}});
            }).find("parameter 'c'"),
            std::string::npos);
  EXPECT_NE(testing::input_error_of([&] {
              testing::solve_and_check(g, 3, "moccasin", {{"order", "any"}});
            }).find("order"),
            std::string::npos);
  EXPECT_NE(testing::input_error_of([&] {
              testing::solve_and_check(g, 3, "moccasin", {{"colour", "1"}});
            }).find("colour"),
            std::string::npos);
}

}  // namespace
}  // namespace remat
