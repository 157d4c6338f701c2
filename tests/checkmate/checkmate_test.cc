// Checkmate MILP and LP: known optima on hand-made graphs, brute force over the fixed-order class,
// cross-checks against other solvers, and the model's memory against the simulator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <tuple>

#include "checkmate_model/formulation.h"
#include "milp/milp.h"
#include "remat/error.h"
#include "remat/generate.h"
#include "remat/io.h"
#include "remat/simulate.h"
#include "testing/testing.h"

namespace remat {
namespace {

using checkmate::build_stage_model;
using checkmate::StageModel;

struct V {
  std::string name;
  int64_t size;
  bool output = false;
};
struct N {
  std::string name;
  double cost;
  std::vector<int32_t> in, out;
  int64_t temp = 0;
  bool recomputable = true;
};

Graph make(std::vector<V> values, std::vector<N> nodes) {
  GraphSpec spec;
  spec.name = "hand";
  for (const V& v : values) spec.values.push_back({v.name, v.size, v.output});
  for (const N& n : nodes) {
    Node node;
    node.name = n.name;
    node.cost = n.cost;
    for (int32_t i : n.in) node.inputs.push_back(ValueId{i});
    for (int32_t o : n.out) node.outputs.push_back(ValueId{o});
    node.temp_bytes = n.temp;
    node.recomputable = n.recomputable;
    spec.nodes.push_back(node);
  }
  return Graph::build(std::move(spec), "test");
}

// A(10) -> B -> C -> D, D reads a again: keeping a costs 12, recomputing A before D fits 11.
Graph recompute_chain(int64_t c_temp = 0) {
  return make(
      {{"a", 10}, {"b", 1}, {"c", 1}, {"d", 0, true}},
      {{"A", 5, {}, {0}}, {"B", 100, {0}, {1}}, {"C", 7, {1}, {2}, c_temp}, {"D", 3, {0, 2}, {3}}});
}

// Brute force over the MILP's class: each stage recomputes any subset of earlier nodes, once each,
// in index order. Returns the least cost within budget (or -1).
double brute_force(const Graph& g, int64_t budget) {
  const int32_t T = g.num_nodes();
  std::vector<std::pair<int32_t, int32_t>> slots;  // (stage, node)
  for (int32_t t = 1; t < T; ++t)
    for (int32_t i = 0; i < t; ++i)
      if (g.node(NodeId{i}).recomputable) slots.push_back({t, i});
  double best = -1;
  for (uint64_t mask = 0; mask < (uint64_t{1} << slots.size()); ++mask) {
    Sequence seq;
    size_t s = 0;
    for (int32_t t = 0; t < T; ++t) {
      for (; s < slots.size() && slots[s].first == t; ++s)
        if (mask >> s & 1) seq.push_back(NodeId{slots[s].second});
      seq.push_back(NodeId{t});
    }
    const Evaluation e = simulate(g, seq);
    if (e.valid && e.peak_bytes <= budget && (best < 0 || e.cost < best)) best = e.cost;
  }
  return best;
}

// The model's own memory for a plan: max over U(t,k) (+temp) of its encoding, in bytes.
int64_t model_peak(const StageModel& sm, const std::vector<double>& x) {
  double peak = 0;
  for (const checkmate::MemoryRow& row : sm.memory_rows) peak = std::max(peak, x[row.u]);
  int64_t temp = 0;
  for (const Node& n : sm.graph->nodes()) temp = std::max(temp, n.temp_bytes);
  (void)temp;
  return static_cast<int64_t>(std::llround(peak)) * sm.size_scale;
}

TEST(Checkmate, ChainRecomputesOnceAtTheKnownOptimum) {
  const Graph g = recompute_chain();
  EXPECT_EQ(baseline(g).peak_bytes, 12);
  const SolveResult r = testing::solve_and_check(g, 11, "checkmate");
  EXPECT_EQ(r.plan.stats.status, SolveStatus::kOptimal);
  EXPECT_EQ(r.eval.cost, 115 + 5);  // A runs twice
  EXPECT_EQ(r.eval.peak_bytes, 11);
  EXPECT_EQ(testing::count_runs(g, r.plan.sequence, "A"), 2);
  ASSERT_TRUE(r.plan.stats.cost_lower_bound);
  EXPECT_DOUBLE_EQ(*r.plan.stats.cost_lower_bound, 120);
  // At the baseline peak nothing is recomputed.
  EXPECT_EQ(testing::solve_and_check(g, 12, "checkmate").eval.cost, 115);
}

TEST(Checkmate, TempMemoryForcesTheRecomputation) {
  // C's temp of 2 makes the baseline peak 14 at C; keeping a through C costs 14 > 13, so A reruns.
  const Graph g = recompute_chain(2);
  EXPECT_EQ(baseline(g).peak_bytes, 14);
  const SolveResult r = testing::solve_and_check(g, 13, "checkmate");
  EXPECT_EQ(r.plan.stats.status, SolveStatus::kOptimal);
  EXPECT_EQ(r.eval.cost, 120);
  EXPECT_LE(r.eval.peak_bytes, 13);
}

TEST(Checkmate, NonRecomputableNodeIsNeverRerun) {
  Graph g = make({{"a", 10}, {"b", 1}, {"c", 1}, {"d", 0, true}}, {{"A", 5, {}, {0}, 0, false},
                                                                   {"B", 100, {0}, {1}},
                                                                   {"C", 7, {1}, {2}},
                                                                   {"D", 3, {0, 2}, {3}}});
  const SolveResult r = testing::solve_and_check(g, 11, "checkmate");
  EXPECT_EQ(r.plan.stats.status, SolveStatus::kOverBudget);  // no fixed-order plan fits
  EXPECT_EQ(testing::count_runs(g, r.plan.sequence, "A"), 1);
}

TEST(Checkmate, MultiOutputNodeAndGraphOutputsAgreeWithBruteForce) {
  // M writes p (big) and q; q feeds N; P needs p and N's r; the output o of N is kept to the end.
  const Graph g =
      make({{"p", 10}, {"q", 2}, {"r", 1}, {"o", 3, true}, {"z", 1, true}},
           {{"M", 4, {}, {0, 1}}, {"N", 9, {1}, {2, 3}}, {"K", 1, {2}, {}}, {"P", 2, {0, 2}, {4}}});
  const int64_t base = baseline(g).peak_bytes;
  for (int64_t budget = base; budget >= memory_lower_bound(g); --budget) {
    const double expected = brute_force(g, budget);
    const SolveResult r = testing::solve_and_check(g, budget, "checkmate");
    if (expected < 0) {
      EXPECT_EQ(r.plan.stats.status, SolveStatus::kOverBudget) << budget;
      continue;
    }
    EXPECT_EQ(r.plan.stats.status, SolveStatus::kOptimal) << budget;
    EXPECT_EQ(r.eval.cost, expected) << budget;
  }
}

TEST(Checkmate, BruteForceAgreesOnSmallGeneratedGraphs) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    RandomLayeredParams p;
    p.num_nodes = 6;
    p.seed = seed;
    p.width = 0.5;
    p.skip_density = 0.5;
    p.max_cost = 20;
    const Graph g = generate_random_layered(p);
    const Baseline base = baseline(g);
    for (double fraction : {0.95, 0.85, 0.75}) {
      const auto budget = static_cast<int64_t>(fraction * static_cast<double>(base.peak_bytes));
      if (budget < memory_lower_bound(g)) continue;
      const double expected = brute_force(g, budget);
      const SolveResult r = testing::solve_and_check(g, budget, "checkmate");
      if (expected < 0) {
        EXPECT_NE(r.plan.stats.status, SolveStatus::kOptimal);
        continue;
      }
      EXPECT_EQ(r.plan.stats.status, SolveStatus::kOptimal) << seed << " " << fraction;
      EXPECT_DOUBLE_EQ(r.eval.cost, expected) << seed << " " << fraction;
    }
  }
}

TEST(Checkmate, ModelMemoryMatchesTheSimulatorOnItsPlans) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    RandomLayeredParams p;
    p.num_nodes = 10;
    p.seed = seed;
    const Graph g = generate_random_layered(p);
    const int64_t budget = baseline(g).peak_bytes * 8 / 10;
    if (budget < memory_lower_bound(g)) continue;
    const SolveResult r = testing::solve_and_check(g, budget, "checkmate");
    if (r.plan.stats.status == SolveStatus::kOverBudget) continue;
    const StageModel sm = build_stage_model(g, budget);
    const std::optional<std::vector<double>> x = sm.encode(r.plan.sequence);
    ASSERT_TRUE(x) << "the plan must be a point of the model";
    EXPECT_EQ(model_peak(sm, *x), r.eval.peak_bytes) << seed;
    EXPECT_DOUBLE_EQ(sm.model.objective_value(*x) * sm.cost_scale, r.eval.cost) << seed;
  }
}

TEST(Checkmate, MilpBeatsFixedOrderPlansAndTheLpBoundsIt) {
  for (int32_t n : {10, 14}) {
    RandomLayeredParams p;
    p.num_nodes = n;
    p.seed = static_cast<uint64_t>(n);
    const Graph g = generate_random_layered(p);
    for (double fraction : {0.9, 0.75}) {
      const auto budget =
          static_cast<int64_t>(fraction * static_cast<double>(baseline(g).peak_bytes));
      if (budget < memory_lower_bound(g)) continue;
      const SolveResult exact = testing::solve_and_check(g, budget, "checkmate");
      const SolveResult lp = testing::solve_and_check(g, budget, "checkmate-lp");
      const SolveResult none = testing::solve_and_check(g, budget, "none");
      ASSERT_TRUE(lp.plan.stats.cost_lower_bound);
      if (exact.plan.stats.status != SolveStatus::kOptimal) continue;
      EXPECT_LE(*lp.plan.stats.cost_lower_bound, exact.eval.cost + 1e-6);
      if (lp.plan.stats.status == SolveStatus::kFeasible) {
        EXPECT_GE(lp.eval.cost, exact.eval.cost - 1e-6);
      }
      if (none.eval.peak_bytes <= budget) {
        EXPECT_LE(exact.eval.cost, none.eval.cost);
      }
    }
  }
}

// The work limit ends CBC's search after a number of simplex iterations, which does not depend on
// the machine's speed or load: two runs, one beside busy threads, end at the same iteration with
// the same incumbent (a wall-clock limit ends them wherever the clock runs out).
TEST(Milp, IterationLimitEndsTheSearchAtTheSamePointOnALoadedMachine) {
  const Graph g = generate_random_layered({.num_nodes = 40, .seed = 3});
  const auto budget = static_cast<int64_t>(0.7 * static_cast<double>(baseline(g).peak_bytes));
  const StageModel sm = build_stage_model(g, budget);
  constexpr int64_t kLimit = 300;
  const milp::MilpOptions options{.time_limit_s = 120, .iteration_limit = kLimit};
  const milp::MilpResult alone = milp::solve_milp(sm.model, options);
  milp::MilpResult loaded;
  {
    const testing::BusyMachine busy;
    loaded = milp::solve_milp(sm.model, options);
  }
  ASSERT_FALSE(alone.stopped_on_time || loaded.stopped_on_time);
  EXPECT_TRUE(alone.stopped_on_iterations);
  EXPECT_GE(alone.iterations, kLimit);
  EXPECT_LT(alone.iterations, 2 * kLimit);  // the stop comes soon after the limit
  EXPECT_EQ(alone.iterations, loaded.iterations);
  EXPECT_EQ(alone.nodes, loaded.nodes);
  EXPECT_EQ(alone.status, loaded.status);
  EXPECT_EQ(alone.x, loaded.x);
}

TEST(Checkmate, WritesTheModelAndRejectsBadParameters) {
  const Graph g = recompute_chain();
  const std::string path = testing::temp_dir("checkmate_mps") + "/chain.mps";
  testing::solve_and_check(g, 11, "checkmate", {{"write_mps", path}});
  EXPECT_TRUE(std::ifstream(path).good());
  EXPECT_NE(testing::input_error_of([&] {
              testing::solve_and_check(g, 11, "checkmate", {{"sample", "3"}});
            }).find("sample"),
            std::string::npos);
  EXPECT_NE(testing::input_error_of([&] {
              testing::solve_and_check(g, 11, "checkmate", {{"max_columns", "3"}});
            }).find("checkmate-lp"),
            std::string::npos);
}

// True when `sequence` is in the MILP's class: first computations in the node order, and each
// stage (up to a first computation) runs every node at most once.
bool in_milp_class(const Graph& g, const Sequence& sequence) {
  if (!checkmate::retention_from_sequence(g, sequence)) return false;
  std::vector<char> in_stage(static_cast<size_t>(g.num_nodes()), 0);
  std::vector<char> seen(static_cast<size_t>(g.num_nodes()), 0);
  for (NodeId n : sequence) {
    const auto i = static_cast<size_t>(n.value());
    if (in_stage[i]) return false;
    in_stage[i] = 1;
    if (!seen[i]) {
      seen[i] = 1;
      std::fill(in_stage.begin(), in_stage.end(), 0);
    }
  }
  return true;
}

// Each other solver's plan that lies in the MILP's class is a feasible point of the MILP at that
// plan's own peak: the proven optimum there costs no more.
TEST(Checkmate, MilpBeatsEveryOtherSolversPlanInItsClass) {
  int compared = 0;
  for (uint64_t seed : {1, 2, 3}) {
    const Graph g = generate_joint({.num_nodes = 16, .seed = seed, .rows = 256, .max_width = 64});
    const int64_t lower = memory_lower_bound(g), peak = baseline(g).peak_bytes;
    for (double fraction : {0.3, 0.7}) {
      const auto budget =
          lower + static_cast<int64_t>(fraction * static_cast<double>(peak - lower));
      for (std::string_view other :
           {"none", "mincut", "rotor", "revolve", "sequential", "fastsa"}) {
        // fastsa in its fixed-order mode: recomputations only, in the MILP's class.
        const ParamMap params = other == "fastsa" ? ParamMap{{"mode", "fixed-order"}} : ParamMap{};
        SolveResult r;
        try {
          r = testing::solve_and_check(g, budget, other, params);
        } catch (const InputError&) {
          continue;  // e.g. no chain structure for the rotor family
        }
        if (!in_milp_class(g, r.plan.sequence)) continue;
        // The proof is CBC's; the annealing warm start (anneal=true) is covered below.
        const SolveResult exact =
            testing::solve_and_check(g, r.eval.peak_bytes, "checkmate", {{"anneal", "false"}});
        if (exact.plan.stats.status != SolveStatus::kOptimal) continue;
        SCOPED_TRACE(::testing::Message() << other << " seed " << seed << " at " << fraction);
        EXPECT_LE(exact.eval.cost, r.eval.cost * (1 + 1e-12));
        if (other != "none") ++compared;
      }
    }
  }
  EXPECT_GE(compared, 3);  // the check ran on plans of other solvers than the default schedule
}

TEST(Checkmate, AnnealingWarmStartCanBeTurnedOff) {
  const Graph g = generate_random_layered({.num_nodes = 14, .seed = 6});
  SolveOptions options;
  options.budget.bytes = baseline(g).peak_bytes * 80 / 100;
  options.work_limit = testing::kTestWorkLimit;
  options.time_limit_s = backstop_time_limit(options.work_limit);
  const SolveResult with = solve(g, "checkmate", options);
  EXPECT_TRUE(with.plan.stats.counter("annealing_cost"));
  options.params = {{"anneal", "false"}};
  const SolveResult without = solve(g, "checkmate", options);
  EXPECT_FALSE(without.plan.stats.counter("annealing_cost"));
  if (with.plan.stats.status == SolveStatus::kOptimal &&
      without.plan.stats.status == SolveStatus::kOptimal) {
    EXPECT_EQ(with.eval.cost, without.eval.cost);
  }
}

// A start is offered as the MILP's stages: with no work for the repair, the annealing or CBC the
// plan is the start's. A start that reorders sets the model's order (its first computations'), so
// the plan keeps that order.
TEST(Checkmate, StartIsOfferedAndSetsTheModelsOrder) {
  const Graph g = recompute_chain();
  SolveOptions options;
  options.budget.bytes = 11;
  options.work_limit = 1e-9;
  options.params = {{"anneal", "false"}};
  const SolveResult cold = solve(g, "checkmate", options);
  EXPECT_EQ(cold.plan.stats.status, SolveStatus::kOverBudget);
  options.start = {NodeId{0}, NodeId{1}, NodeId{2}, NodeId{0}, NodeId{3}};  // A reruns before D
  const SolveResult warm = solve(g, "checkmate", options);
  EXPECT_LE(warm.eval.peak_bytes, 11);
  EXPECT_EQ(warm.eval.cost, 120);
  EXPECT_EQ(warm.plan.stats.counter("start_in_fixed_order").value_or(-1), 1);
  EXPECT_EQ(warm.plan.stats.counter("mip_start").value_or(-1), 1);
  EXPECT_FALSE(warm.plan.stats.counter("start_order"));

  // A and B each make 10 bytes that C reads; B's 10-byte temp makes B before A peak at 20, where
  // the default order needs A run again after B to fit 20 (cost 4 against 3).
  const Graph two = make({{"a", 10}, {"b", 10}, {"c", 0, true}},
                         {{"A", 1, {}, {0}}, {"B", 1, {}, {1}, 10}, {"C", 1, {0, 1}, {2}}});
  options.budget.bytes = 20;
  options.work_limit = 1;
  options.start = {NodeId{1}, NodeId{0}, NodeId{2}};  // B before A
  const SolveResult reordered = solve(two, "checkmate", options);
  EXPECT_EQ(reordered.plan.stats.counter("start_order").value_or(-1), 1);
  EXPECT_EQ(reordered.plan.sequence, options.start);
  EXPECT_EQ(reordered.eval.cost, 3);
  options.start.clear();
  EXPECT_EQ(solve(two, "checkmate", options).eval.cost, 4);
}

}  // namespace
}  // namespace remat
