// The incremental state of FastSA against the simulator: after every mutation of long random
// sequences, the peak kept by the segment tree and the cost equal remat::simulate's figures for
// the sequence with nops removed, and a mutation is judged valid exactly when the simulator
// accepts the mutated sequence.
#include "fastsa/state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "fastsa/anneal.h"
#include "fastsa/segment_tree.h"
#include "fastsa/units.h"
#include "fastsa_test_graphs.h"
#include "remat/generate.h"
#include "remat/random.h"
#include "remat/simulate.h"

namespace remat::fastsa {
namespace {

using testing::rich_random_graph;

struct Counts {
  int applied = 0;
  int rejected = 0;
};

// The slot vector as a unit sequence after writing `unit` at `t` (kNop clears).
std::vector<int32_t> mutated(const SaState& s,
                             std::initializer_list<std::pair<int32_t, int32_t>> writes) {
  std::vector<int32_t> slots(static_cast<size_t>(s.num_slots()));
  for (int32_t t = 0; t < s.num_slots(); ++t) slots[static_cast<size_t>(t)] = s.unit_at(t);
  for (auto [t, unit] : writes) slots[static_cast<size_t>(t)] = unit;
  std::vector<int32_t> order;
  for (int32_t u : slots)
    if (u != kNop) order.push_back(u);
  return order;
}

int32_t random_nop(const SaState& s, Rng& rng) {
  for (;;) {
    const auto t = static_cast<int32_t>(rng.below(static_cast<uint64_t>(s.num_slots())));
    if (s.is_nop(t)) return t;
  }
}

// Random add / remove / move steps on single-node units; checks validity both ways and the
// figures after every applied step.
Counts check_against_simulator(const Graph& g, int32_t slots, int steps, uint64_t seed) {
  const UnitTable units = *node_units(g);
  constexpr double kSoftScale = 0.01;
  SaState s(units, slots, units.initial_order, kSoftScale);
  Rng rng(seed);
  Counts counts;
  for (int step = 0; step < steps; ++step) {
    const uint64_t kind = rng.below(3);
    bool can = false;
    std::vector<int32_t> after;
    int32_t unit = 0, from = 0, to = 0;
    if (kind == 0 || s.num_occupied() == 0) {
      unit = static_cast<int32_t>(rng.below(static_cast<uint64_t>(units.num_units())));
      to = random_nop(s, rng);
      can = s.can_add(unit, to);
      after = mutated(s, {{to, unit}});
    } else {
      from =
          s.occupied_slot(static_cast<int32_t>(rng.below(static_cast<uint64_t>(s.num_occupied()))));
      unit = s.unit_at(from);
      if (kind == 1) {
        can = s.can_remove(from);
        after = mutated(s, {{from, kNop}});
      } else {
        to = random_nop(s, rng);
        can = s.can_move(from, to);
        after = mutated(s, {{from, kNop}, {to, unit}});
        const auto [lo, hi] = s.move_range(from);  // the range local rotations draw from
        EXPECT_EQ(can, lo < to && to < hi) << "step " << step;
      }
    }
    const Evaluation expected = simulate(g, units.expand(after));
    EXPECT_EQ(can, expected.valid) << "step " << step << " kind " << kind << ": " << expected.error;
    if (!can) {
      ++counts.rejected;
      continue;
    }
    ++counts.applied;
    if (kind == 0 || s.num_occupied() == 0)
      s.add(unit, to);
    else if (kind == 1)
      s.remove(from);
    else
      s.move(from, to);
    EXPECT_EQ(s.peak(), expected.peak_bytes) << "step " << step << " kind " << kind;
    EXPECT_NEAR(s.cost(), expected.cost, 1e-6);
    EXPECT_GE(s.soft_peak(), static_cast<double>(expected.peak_bytes) - 1e-6);
    EXPECT_LE(s.soft_peak(), static_cast<double>(expected.peak_bytes) +
                                 std::log2(static_cast<double>(s.num_occupied())) / kSoftScale +
                                 1e-6);
    if (::testing::Test::HasFailure()) break;  // one clear failure, not thousands
  }
  return counts;
}

TEST(FastsaState, IncrementalPeakMatchesSimulatorOnRichGraphs) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const Graph g =
        rich_random_graph({.num_nodes = 25 + 5 * static_cast<int32_t>(seed), .seed = seed});
    const Counts c = check_against_simulator(g, /*slots=*/256, /*steps=*/4000, seed);
    // Both outcomes must be exercised for the test to mean anything.
    EXPECT_GT(c.applied, 500) << g.name();
    EXPECT_GT(c.rejected, 100) << g.name();
    ASSERT_FALSE(HasFailure()) << g.name();
  }
}

TEST(FastsaState, IncrementalPeakMatchesSimulatorOnLayeredGraphs) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const Graph g = generate_random_layered({.num_nodes = 60, .seed = seed});
    const Counts c = check_against_simulator(g, /*slots=*/512, /*steps=*/3000, seed + 100);
    EXPECT_GT(c.applied, 500) << g.name();
    ASSERT_FALSE(HasFailure()) << g.name();
  }
}

// The incremental trees (deferred range adds merged per mutation, ancestors recomputed once)
// equal trees built from scratch from the slots after every mutation and every undo, and
// undo_last gives back the state before the mutation: slots, occupied-slot order, peak and cost.
void check_undo_and_rebuild(const Graph& g, int32_t slots, int steps, uint64_t seed,
                            double soft_scale) {
  const UnitTable units = *node_units(g);
  SaState s(units, slots, units.initial_order, soft_scale);
  Rng rng(seed);
  int undone = 0;
  for (int step = 0; step < steps; ++step) {
    const uint64_t kind = rng.below(3);
    std::vector<int32_t> slots_before(static_cast<size_t>(s.num_slots()));
    for (int32_t t = 0; t < s.num_slots(); ++t) slots_before[static_cast<size_t>(t)] = s.unit_at(t);
    std::vector<int32_t> occupied_before(static_cast<size_t>(s.num_occupied()));
    for (int32_t i = 0; i < s.num_occupied(); ++i)
      occupied_before[static_cast<size_t>(i)] = s.occupied_slot(i);
    const int64_t peak_before = s.peak();
    const double cost_before = s.cost();
    if (kind == 0) {
      const auto unit = static_cast<int32_t>(rng.below(static_cast<uint64_t>(units.num_units())));
      const int32_t to = random_nop(s, rng);
      if (!s.can_add(unit, to)) continue;
      s.add(unit, to);
    } else {
      const int32_t from =
          s.occupied_slot(static_cast<int32_t>(rng.below(static_cast<uint64_t>(s.num_occupied()))));
      const int32_t to = random_nop(s, rng);
      if (kind == 1 && s.can_remove(from))
        s.remove(from);
      else if (kind == 2 && s.can_move(from, to))
        s.move(from, to);
      else
        continue;
    }
    ASSERT_TRUE(s.trees_match_rebuild()) << "step " << step << " kind " << kind;
    if (rng.below(2) == 0) continue;  // keep the mutation
    s.undo_last();
    ++undone;
    ASSERT_TRUE(s.trees_match_rebuild()) << "undo of step " << step << " kind " << kind;
    ASSERT_EQ(s.peak(), peak_before) << "step " << step;
    ASSERT_NEAR(s.cost(), cost_before, 1e-9 * std::abs(cost_before)) << "step " << step;
    for (int32_t t = 0; t < s.num_slots(); ++t)
      ASSERT_EQ(s.unit_at(t), slots_before[static_cast<size_t>(t)]) << "step " << step;
    std::vector<int32_t> occupied(static_cast<size_t>(s.num_occupied()));
    for (int32_t i = 0; i < s.num_occupied(); ++i)
      occupied[static_cast<size_t>(i)] = s.occupied_slot(i);
    std::sort(occupied.begin(), occupied.end());
    std::sort(occupied_before.begin(), occupied_before.end());
    ASSERT_EQ(occupied, occupied_before) << "step " << step;
  }
  EXPECT_GT(undone, steps / 10);
}

TEST(FastsaState, IncrementalTreesEqualARebuildAfterMutationsAndUndos) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const Graph g =
        rich_random_graph({.num_nodes = 30 + 5 * static_cast<int32_t>(seed), .seed = seed});
    check_undo_and_rebuild(g, /*slots=*/256, /*steps=*/1500, seed, /*soft_scale=*/0);
    check_undo_and_rebuild(g, /*slots=*/512, /*steps=*/500, seed + 10, /*soft_scale=*/0.01);
    ASSERT_FALSE(HasFailure()) << g.name();
  }
  const Graph layered = generate_random_layered({.num_nodes = 80, .seed = 5});
  check_undo_and_rebuild(layered, /*slots=*/1024, /*steps=*/1500, 7, /*soft_scale=*/0);
}

// Without a log-add-exp tree, undo_last takes the max tree back from its undo log and redoes
// only the slots and times; with one, it is the inverse mutation throughout. Both must leave the
// same state, down to the order of the occupied slots (which the sampling reads): two states
// given the same mutations and undos agree after every step.
TEST(FastsaState, UndoFromTheLogEqualsTheInverseMutation) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const Graph g = seed == 3 ? generate_random_layered({.num_nodes = 80, .seed = 5})
                              : rich_random_graph({.num_nodes = 40, .seed = seed});
    const UnitTable units = *node_units(g);
    SaState logged(units, 512, units.initial_order, /*soft_peak_scale=*/0);
    SaState inverse(units, 512, units.initial_order, /*soft_peak_scale=*/0.01);
    Rng rng(seed + 20);
    int undone = 0;
    for (int step = 0; step < 2000; ++step) {
      const uint64_t kind = rng.below(3);
      const int32_t from = logged.occupied_slot(
          static_cast<int32_t>(rng.below(static_cast<uint64_t>(logged.num_occupied()))));
      const int32_t to = random_nop(logged, rng);
      const auto unit = static_cast<int32_t>(rng.below(static_cast<uint64_t>(units.num_units())));
      if (kind == 0 && logged.can_add(unit, to)) {
        logged.add(unit, to);
        inverse.add(unit, to);
      } else if (kind == 1 && logged.can_remove(from)) {
        logged.remove(from);
        inverse.remove(from);
      } else if (kind == 2 && logged.can_move(from, to)) {
        logged.move(from, to);
        inverse.move(from, to);
      } else {
        continue;
      }
      if (rng.below(4) != 0) {  // most mutations are undone, as in the annealing
        logged.undo_last();
        inverse.undo_last();
        ++undone;
      }
      ASSERT_EQ(logged.peak(), inverse.peak()) << "step " << step;
      ASSERT_EQ(logged.cost(), inverse.cost()) << "step " << step;
      ASSERT_EQ(logged.num_occupied(), inverse.num_occupied()) << "step " << step;
      for (int32_t i = 0; i < logged.num_occupied(); ++i)
        ASSERT_EQ(logged.occupied_slot(i), inverse.occupied_slot(i)) << "step " << step;
      for (int32_t t = 0; t < logged.num_slots(); ++t)
        ASSERT_EQ(logged.unit_at(t), inverse.unit_at(t)) << "step " << step;
      ASSERT_TRUE(logged.trees_match_rebuild()) << "step " << step;
    }
    EXPECT_GT(undone, 200) << g.name();
  }
}

TEST(FastsaState, InitialStateEqualsBaseline) {
  const Graph g = rich_random_graph({.num_nodes = 40, .seed = 9});
  const UnitTable units = *node_units(g);
  const SaState s(units, 1024, units.initial_order);
  EXPECT_EQ(s.peak(), baseline(g).peak_bytes);
  EXPECT_DOUBLE_EQ(s.cost(), baseline(g).cost);
  EXPECT_EQ(units.expand(s.sequence()), default_schedule(g));
}

// Grouped units model a group's members by its inputs, outputs and temp over one slot; that must
// bound the expanded sequence's memory from above, so a stage-1 state within budget stays within
// budget when decomposed.
TEST(FastsaState, GroupedModelBoundsTheExpandedPeak) {
  int grouped_graphs = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const Graph g = rich_random_graph({.num_nodes = 40, .seed = seed, .non_recomputable = 0.05});
    const UnitTable units = *group_units(g, {});
    grouped_graphs += units.num_units() < g.num_nodes();
    SaState s(units, 512, units.initial_order);
    Rng rng(seed);
    for (int step = 0; step < 2000; ++step) {
      const int32_t from =
          s.occupied_slot(static_cast<int32_t>(rng.below(static_cast<uint64_t>(s.num_occupied()))));
      const int32_t to = random_nop(s, rng);
      const auto unit = static_cast<int32_t>(rng.below(static_cast<uint64_t>(units.num_units())));
      switch (rng.below(3)) {
        case 0:
          if (s.can_add(unit, to)) s.add(unit, to);
          break;
        case 1:
          if (s.can_remove(from)) s.remove(from);
          break;
        default:
          if (s.can_move(from, to)) s.move(from, to);
          break;
      }
      const Evaluation e = simulate(g, units.expand(s.sequence()));
      ASSERT_TRUE(e.valid) << e.error;
      EXPECT_LE(e.peak_bytes, s.peak()) << "seed " << seed << " step " << step;
      EXPECT_NEAR(e.cost, s.cost(), 1e-6);
      if (HasFailure()) return;
    }
  }
  EXPECT_GE(grouped_graphs, 4);  // grouping happened on most graphs
}

TEST(FastsaSegmentTree, MaxAndLeavesAfterRangeAdds) {
  std::vector<int64_t> plain(64, 0);
  MaxAddTree tree(plain);
  Rng rng(3);
  for (int step = 0; step < 2000; ++step) {
    auto l = static_cast<int32_t>(rng.below(64)), r = static_cast<int32_t>(rng.below(64));
    if (l > r) std::swap(l, r);
    const int64_t x = rng.between(-50, 50);
    tree.add(l, r, x);
    for (int32_t i = l; i <= r; ++i) plain[static_cast<size_t>(i)] += x;
    ASSERT_EQ(tree.root(), *std::max_element(plain.begin(), plain.end()));
    const auto probe = static_cast<int32_t>(rng.below(64));
    ASSERT_EQ(tree.leaf(probe), plain[static_cast<size_t>(probe)]);
  }
}

// argmax() is the leftmost leaf of the maximum with ties = 0, and with random tie bits some leaf
// of the maximum; over many draws each of two equal maxima comes up. Small values make ties
// frequent.
TEST(FastsaSegmentTree, ArgmaxIsALeafOfTheMaximum) {
  Rng rng(5);
  for (int32_t size : {1, 2, 64, 1024}) {
    std::vector<int64_t> plain(static_cast<size_t>(size), 0);
    MaxAddTree tree(plain);
    for (int step = 0; step < 500; ++step) {
      auto l = static_cast<int32_t>(rng.below(static_cast<uint64_t>(size)));
      auto r = static_cast<int32_t>(rng.below(static_cast<uint64_t>(size)));
      if (l > r) std::swap(l, r);
      const int64_t x = rng.between(-3, 3);
      if (rng.below(2) == 0) {
        tree.add(l, r, x);
      } else {  // deferred, as one mutation's adds
        tree.add_deferred(l, r, x);
        tree.add_to_leaf_deferred(r, -x);
        tree.rebuild();
        plain[static_cast<size_t>(r)] -= x;
      }
      for (int32_t i = l; i <= r; ++i) plain[static_cast<size_t>(i)] += x;
      const auto top = std::max_element(plain.begin(), plain.end());
      ASSERT_EQ(tree.argmax(), static_cast<int32_t>(top - plain.begin())) << "size " << size;
      std::vector<char> seen(static_cast<size_t>(size), 0);
      for (int draw = 0; draw < 64; ++draw) {
        const int32_t at = tree.argmax(rng.next());
        ASSERT_EQ(plain[static_cast<size_t>(at)], *top) << "size " << size;
        seen[static_cast<size_t>(at)] = 1;
      }
      // Two equal maxima split at one tie, a fair bit: 64 draws that all miss one of them would
      // be a bit stuck at one value (the seed is fixed, so this never flakes).
      const auto maxima = std::count(plain.begin(), plain.end(), *top);
      if (maxima > 2) continue;
      for (int32_t i = 0; i < size; ++i) {
        if (plain[static_cast<size_t>(i)] == *top) {
          ASSERT_TRUE(seen[static_cast<size_t>(i)]) << "size " << size << " leaf " << i;
        }
      }
    }
  }
}

// One mutation's adds are deferred, merged into disjoint ranges (they overlap, share ends and
// cancel) and applied by one rebuild: the root and every leaf equal plain arrays, on trees from
// one leaf to a few thousand.
TEST(FastsaSegmentTree, DeferredBatchesOfOverlappingAddsMatchPlainArrays) {
  Rng rng(11);
  for (int32_t size : {1, 2, 8, 64, 1024, 4096}) {
    std::vector<int64_t> plain(static_cast<size_t>(size));
    for (int64_t& x : plain) x = rng.between(-1000, 1000);
    MaxAddTree tree(plain);
    for (int batch = 0; batch < 300; ++batch) {
      const auto adds = static_cast<int>(1 + rng.below(8));
      for (int k = 0; k < adds; ++k) {
        auto l = static_cast<int32_t>(rng.below(static_cast<uint64_t>(size)));
        auto r = static_cast<int32_t>(rng.below(static_cast<uint64_t>(size)));
        if (l > r) std::swap(l, r);
        if (k > 0 && rng.below(3) == 0) r = l;  // a point add, as a slot's temp
        const int64_t x = rng.between(-50, 50);
        // A slot's temp goes to its leaf at once (add_to_leaf_deferred), among range adds.
        if (l == r && rng.below(2) == 0)
          tree.add_to_leaf_deferred(l, x);
        else
          tree.add_deferred(l, r, x);
        for (int32_t i = l; i <= r; ++i) plain[static_cast<size_t>(i)] += x;
        if (rng.below(4) == 0) {  // the same range taken back, as a shrink then an extend
          tree.add_deferred(l, r, -x);
          for (int32_t i = l; i <= r; ++i) plain[static_cast<size_t>(i)] -= x;
        }
      }
      tree.rebuild();
      ASSERT_EQ(tree.root(), *std::max_element(plain.begin(), plain.end())) << "size " << size;
    }
    for (int32_t i = 0; i < size; ++i)
      ASSERT_EQ(tree.leaf(i), plain[static_cast<size_t>(i)]) << "size " << size << " leaf " << i;
  }
}

// With the undo log on, restore() after a batch of adds gives back the tree before it: the root
// and every leaf equal the plain array the batch was not applied to.
TEST(FastsaSegmentTree, RestoreTakesBackABatchExactly) {
  Rng rng(17);
  for (int32_t size : {1, 2, 64, 4096}) {
    std::vector<int64_t> plain(static_cast<size_t>(size));
    for (int64_t& x : plain) x = rng.between(-1000, 1000);
    MaxAddTree tree(plain);
    tree.keep_undo_log(true);
    for (int batch = 0; batch < 300; ++batch) {
      const bool take_back = rng.below(2) == 0;
      tree.clear_undo_log();
      const auto adds = static_cast<int>(1 + rng.below(8));
      for (int k = 0; k < adds; ++k) {
        auto l = static_cast<int32_t>(rng.below(static_cast<uint64_t>(size)));
        auto r = static_cast<int32_t>(rng.below(static_cast<uint64_t>(size)));
        if (l > r) std::swap(l, r);
        const int64_t x = rng.between(-50, 50);
        if (l == r)
          tree.add_to_leaf_deferred(l, x);
        else
          tree.add_deferred(l, r, x);
        if (!take_back)
          for (int32_t i = l; i <= r; ++i) plain[static_cast<size_t>(i)] += x;
      }
      tree.rebuild();
      if (take_back) tree.restore();
      ASSERT_EQ(tree.root(), *std::max_element(plain.begin(), plain.end())) << "size " << size;
      const auto probe = static_cast<int32_t>(rng.below(static_cast<uint64_t>(size)));
      ASSERT_EQ(tree.leaf(probe), plain[static_cast<size_t>(probe)]) << "size " << size;
    }
    for (int32_t i = 0; i < size; ++i)
      ASSERT_EQ(tree.leaf(i), plain[static_cast<size_t>(i)]) << "size " << size << " leaf " << i;
  }
}

TEST(FastsaSegmentTree, LogAddExpIsASmoothMaximum) {
  const std::vector<double> leaves = {1.0, 3.0, 3.0, -1e4};
  LogAddExpTree tree(leaves);
  EXPECT_NEAR(tree.root(), std::log2(2.0 + 8.0 + 8.0), 1e-12);
  tree.add(0, 1, 2.0);  // 3, 5, 3
  EXPECT_NEAR(tree.root(), std::log2(8.0 + 32.0 + 8.0), 1e-12);
}

// A work unit is meant to cost about the same CPU on any graph: a move on a state larger than
// the reference size counts more than one, so the same work limit runs fewer iterations there.
TEST(FastsaWorkUnits, MovesOnLargeStatesCountMore) {
  EXPECT_EQ(move_weight(kReferenceSlots), 1.0);
  EXPECT_EQ(move_weight(1 << 12), 1.0);
  EXPECT_NEAR(move_weight(kReferenceSlots * 32), std::pow(32.0, 0.4), 1e-12);
  const Graph g = rich_random_graph({.num_nodes = 40, .seed = 5});
  const UnitTable units = *node_units(g);
  for (const int32_t slots : {1 << 12, kReferenceSlots * 4}) {
    WalkContext context;
    context.budget_bytes = 0;  // never reached: the stage runs to its moves
    context.moves_left = 20'000;
    const StageSettings settings{.iterations = 1'000'000, .slots = slots};
    const StageResult r = run_stage(units, units.initial_order, settings, "test", context);
    EXPECT_TRUE(r.work_limit_hit);
    EXPECT_EQ(r.iterations, static_cast<int64_t>(20'000 / move_weight(slots))) << slots;
    EXPECT_LT(static_cast<double>(context.moves_left), move_weight(slots)) << slots;
  }
}

}  // namespace
}  // namespace remat::fastsa
