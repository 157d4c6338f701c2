// The simulator on hand-made graphs whose figures are computed by hand in the comments.
#include "remat/simulate.h"

#include <gtest/gtest.h>

#include "remat/generate.h"
#include "remat/random.h"
#include "testing/testing.h"

namespace remat {
namespace {

Sequence seq(const Graph& g, std::initializer_list<std::string_view> names) {
  Sequence s;
  for (std::string_view name : names) s.push_back(*g.find_node(name));
  return s;
}

// f -> a(10); g: a -> b(10); h: b -> c(10); k: a, c -> d(1, output). Costs 1, 2, 3, 4.
Graph late_use_graph() {
  GraphSpec spec;
  spec.values = {{"a", 10}, {"b", 10}, {"c", 10}, {"d", 1, true}};
  spec.nodes = {
      {.name = "f", .cost = 1, .outputs = {ValueId{0}}},
      {.name = "g", .cost = 2, .inputs = {ValueId{0}}, .outputs = {ValueId{1}}},
      {.name = "h", .cost = 3, .inputs = {ValueId{1}}, .outputs = {ValueId{2}}},
      {.name = "k", .cost = 4, .inputs = {ValueId{0}, ValueId{2}}, .outputs = {ValueId{3}}}};
  return Graph::build(spec, "late_use");
}

TEST(Simulate, DefaultScheduleByHand) {
  // a lives [0,3], b [1,2], c [2,3], d [3,3]: mem = 10, 20, 30, 21.
  const Graph g = late_use_graph();
  const Evaluation e = simulate(g, default_schedule(g), {.timeline = true});
  ASSERT_TRUE(e.valid) << e.error;
  EXPECT_EQ(e.timeline, (std::vector<int64_t>{10, 20, 30, 21}));
  EXPECT_EQ(e.peak_bytes, 30);
  EXPECT_EQ(e.peak_step, 2);
  EXPECT_DOUBLE_EQ(e.cost, 10);
}

TEST(Simulate, FirstRunReorderingIsTheOrderOfFirstRunsWhenNotTheDefault) {
  const Graph g = late_use_graph();
  EXPECT_FALSE(first_run_reordering(g, default_schedule(g)));
  EXPECT_FALSE(first_run_reordering(g, seq(g, {"f", "g", "h", "f", "k"})));  // reruns only
  EXPECT_FALSE(first_run_reordering(g, seq(g, {"f", "h", "k"})));            // g never runs
  EXPECT_EQ(first_run_reordering(g, seq(g, {"f", "h", "g", "f", "k"})),
            seq(g, {"f", "h", "g", "k"}));
}

TEST(Simulate, RecomputationLowersPeakByHand) {
  // f g h f k: the first a dies after g, the second lives [3,4]: mem = 10, 20, 20, 20, 21.
  const Graph g = late_use_graph();
  const Evaluation e = simulate(g, seq(g, {"f", "g", "h", "f", "k"}), {.timeline = true});
  ASSERT_TRUE(e.valid) << e.error;
  EXPECT_EQ(e.timeline, (std::vector<int64_t>{10, 20, 20, 20, 21}));
  EXPECT_EQ(e.peak_bytes, 21);
  EXPECT_DOUBLE_EQ(e.cost, 11);  // f runs twice
}

TEST(Simulate, MultiOutputNode) {
  // s -> (p 5, q 7); u: p -> r(1, out); w: q -> z(2, out).
  // t0 s: p+q = 12; t1 u: p+q+r = 13; t2 w: q+r+z = 10.
  GraphSpec spec;
  spec.values = {{"p", 5}, {"q", 7}, {"r", 1, true}, {"z", 2, true}};
  spec.nodes = {{.name = "s", .outputs = {ValueId{0}, ValueId{1}}},
                {.name = "u", .inputs = {ValueId{0}}, .outputs = {ValueId{2}}},
                {.name = "w", .inputs = {ValueId{1}}, .outputs = {ValueId{3}}}};
  const Graph g = Graph::build(spec, "multi");
  const Evaluation e = simulate(g, default_schedule(g), {.timeline = true});
  ASSERT_TRUE(e.valid) << e.error;
  EXPECT_EQ(e.timeline, (std::vector<int64_t>{12, 13, 10}));
}

TEST(Simulate, TempCountsOnlyWhileTheNodeRuns) {
  // x(4, input) -> f(temp 100) -> y(2) -> g -> z(1, out): mem = 4+2+100, 4+2+1.
  GraphSpec spec;
  spec.values = {{"x", 4}, {"y", 2}, {"z", 1, true}};
  spec.nodes = {{.name = "f", .inputs = {ValueId{0}}, .outputs = {ValueId{1}}, .temp_bytes = 100},
                {.name = "g", .inputs = {ValueId{1}}, .outputs = {ValueId{2}}}};
  const Graph g = Graph::build(spec, "temp");
  const Evaluation e = simulate(g, default_schedule(g), {.timeline = true});
  EXPECT_EQ(e.timeline, (std::vector<int64_t>{106, 7}));
  EXPECT_EQ(memory_lower_bound(g), 106);
}

TEST(Simulate, AliasKeepsRootAlive) {
  // f -> a(16); v: a -> view (alias of a); g -> big(50); h: view -> out(1).
  // Without the alias rewrite a would die after v; with it a lives to h:
  // mem = 16, 16, 16+50, 16+50+1.
  GraphSpec spec;
  spec.values = {{"a", 16}, {"view", 0}, {"big", 50}, {"out", 1, true}};
  spec.values[1].alias_of = ValueId{0};
  spec.nodes = {{.name = "f", .outputs = {ValueId{0}}},
                {.name = "v", .inputs = {ValueId{0}}, .outputs = {ValueId{1}}},
                {.name = "g", .outputs = {ValueId{2}}},
                {.name = "h", .inputs = {ValueId{1}, ValueId{2}}, .outputs = {ValueId{3}}}};
  const Graph g = Graph::build(spec, "alias");
  const Evaluation e = simulate(g, default_schedule(g), {.timeline = true});
  EXPECT_EQ(e.timeline, (std::vector<int64_t>{16, 16, 66, 67}));
}

TEST(Simulate, GraphOutputsStayToTheEnd) {
  // o(7, out) is produced first and never read; it still counts at every later step.
  GraphSpec spec;
  spec.values = {{"o", 7, true}, {"a", 3}, {"b", 1, true}};
  spec.nodes = {{.name = "p", .outputs = {ValueId{0}}},
                {.name = "q", .outputs = {ValueId{1}}},
                {.name = "r", .inputs = {ValueId{1}}, .outputs = {ValueId{2}}}};
  const Graph g = Graph::build(spec, "outputs");
  const Evaluation e = simulate(g, default_schedule(g), {.timeline = true});
  EXPECT_EQ(e.timeline, (std::vector<int64_t>{7, 10, 11}));
}

TEST(Simulate, GraphInputsAreAlwaysResident) {
  GraphSpec spec;
  spec.values = {{"w", 100}, {"a", 1, true}};
  spec.nodes = {{.name = "f", .outputs = {ValueId{1}}}};
  const Graph g = Graph::build(spec, "inputs");
  EXPECT_EQ(simulate(g, default_schedule(g)).peak_bytes, 101);
}

TEST(Simulate, InvalidSequencesNameTheStep) {
  const Graph g = late_use_graph();
  Evaluation e = simulate(g, seq(g, {"f", "h", "g", "k"}));
  EXPECT_FALSE(e.valid);
  EXPECT_EQ(e.error_step, 1);
  EXPECT_EQ(e.error, "step 1: node 2 ('h') reads value 1 ('b') before it is produced");
  e = simulate(g, seq(g, {"f", "g", "h"}));
  EXPECT_FALSE(e.valid);
  EXPECT_EQ(e.error, "graph output value 3 ('d') is never produced");
  e = simulate(g, Sequence{NodeId{0}, NodeId{7}});
  EXPECT_EQ(e.error, "step 1: node id 7 does not exist");
  e = simulate(g, Sequence{});
  EXPECT_FALSE(e.valid);
}

TEST(Simulate, NonRecomputableRunsExactlyOnce) {
  GraphSpec spec;
  spec.values = {{"mask", 1}, {"y", 1, true}};
  spec.nodes = {{.name = "dropout", .outputs = {ValueId{0}}, .recomputable = false},
                {.name = "use", .inputs = {ValueId{0}}, .outputs = {ValueId{1}}}};
  const Graph g = Graph::build(spec, "random");
  Evaluation e = simulate(g, Sequence{NodeId{0}, NodeId{0}, NodeId{1}});
  EXPECT_EQ(e.error, "step 1: node 0 ('dropout') is not recomputable and already ran");
  EXPECT_TRUE(simulate(g, default_schedule(g)).valid);
}

TEST(Simulate, BoundsOnHandGraph) {
  const Graph g = late_use_graph();
  // Largest required-node footprint: k reads a and c and writes d = 21; final footprint d = 1.
  EXPECT_EQ(memory_lower_bound(g), 21);
  EXPECT_DOUBLE_EQ(cost_lower_bound(g), 10);
  const Baseline b = baseline(g);
  EXPECT_EQ(b.peak_bytes, 30);
  EXPECT_DOUBLE_EQ(b.cost, 10);
}

TEST(Simulate, UnneededNodesAreNotInTheCostBound) {
  GraphSpec spec;
  spec.values = {{"a", 1, true}, {"dead", 1}};
  spec.nodes = {{.name = "f", .cost = 2, .outputs = {ValueId{0}}},
                {.name = "g", .cost = 5, .outputs = {ValueId{1}}}};
  const Graph g = Graph::build(spec, "dead");
  EXPECT_DOUBLE_EQ(cost_lower_bound(g), 2);
  EXPECT_TRUE(simulate(g, Sequence{NodeId{0}}).valid);
}

// Randomized cross-check against a direct O(T * V) replay of the simulator rule (docs/design.md
// §1).
int64_t reference_peak(const Graph& g, const Sequence& s) {
  const auto steps = static_cast<int32_t>(s.size());
  std::vector<int64_t> mem(static_cast<size_t>(steps), 0);
  for (int32_t v = 0; v < g.num_values(); ++v) {
    const ValueId id{v};
    const int64_t size = g.value(id).size_bytes;
    if (g.is_graph_input(id)) {
      for (auto& m : mem) m += size;
      continue;
    }
    std::vector<int32_t> productions;
    for (int32_t t = 0; t < steps; ++t)
      for (ValueId o : g.node(s[static_cast<size_t>(t)]).outputs)
        if (o == id) productions.push_back(t);
    for (size_t i = 0; i < productions.size(); ++i) {
      const int32_t p = productions[i];
      const int32_t next = i + 1 < productions.size() ? productions[i + 1] : steps;
      int32_t end = p;
      for (int32_t t = p + 1; t < next; ++t)
        for (ValueId in : g.node(s[static_cast<size_t>(t)]).inputs)
          if (in == id) end = t;
      if (i + 1 == productions.size() && g.value(id).is_output) end = steps - 1;
      for (int32_t t = p; t <= end; ++t) mem[static_cast<size_t>(t)] += size;
    }
  }
  int64_t peak = 0;
  for (int32_t t = 0; t < steps; ++t)
    peak =
        std::max(peak, mem[static_cast<size_t>(t)] + g.node(s[static_cast<size_t>(t)]).temp_bytes);
  return peak;
}

TEST(Simulate, MatchesReferenceReplayOnRandomRecomputations) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Graph g = generate_random_layered({.num_nodes = 40, .seed = seed});
    Rng rng(seed);
    // Default order with random extra copies of earlier nodes inserted: always valid.
    Sequence s;
    for (int32_t n = 0; n < g.num_nodes(); ++n) {
      if (n > 0 && rng.uniform() < 0.3)
        s.push_back(NodeId{static_cast<int32_t>(rng.below(static_cast<uint64_t>(n)))});
      s.push_back(NodeId{n});
    }
    const Evaluation e = simulate(g, s);
    ASSERT_TRUE(e.valid) << e.error;
    EXPECT_EQ(e.peak_bytes, reference_peak(g, s)) << "seed " << seed;
    EXPECT_GE(e.peak_bytes, memory_lower_bound(g));
  }
}

}  // namespace
}  // namespace remat
