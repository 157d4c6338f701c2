// Brute force over every valid sequence of tiny chains (L <= 4): Dijkstra over memory states
// (which of a^ℓ, ā^ℓ, δ^ℓ are stored), with the transitions of Table 1, gives the least makespan
// within a budget and the least peak of any sequence. The weak-persistent DP must agree with both
// (Lemma 4.4: some optimal sequence is weakly persistent); the persistent DP must never beat it.
#include <gtest/gtest.h>

#include <cstdint>
#include <queue>
#include <vector>

#include "remat/generate.h"
#include "remat/random.h"
#include "remat/registry.h"

namespace remat::rotor {
namespace {

// A memory state as bits: a^ℓ at ℓ, ā^ℓ at 6 + ℓ, δ^ℓ at 12 + ℓ (ℓ = 0..n <= 5, so L <= 4).
using State = uint32_t;
constexpr size_t kStates = size_t{1} << 18;
constexpr State a_bit(int l) { return State{1} << l; }
constexpr State abar_bit(int l) { return State{1} << (6 + l); }
constexpr State delta_bit(int l) { return State{1} << (12 + l); }

struct Step {
  State next;
  int64_t memory;  // Definition 3.3
  double time;
  ChainOp op;
};

class StateSpace {
 public:
  explicit StateSpace(const Chain& chain) : chain_(chain), n_(chain.length() + 1) {}
  State start() const { return a_bit(0) | delta_bit(n_); }
  bool done(State s) const { return (s & delta_bit(0)) != 0; }

  int64_t bytes(State s) const {
    int64_t total = 0;
    for (int l = 0; l <= n_; ++l) {
      if (s & a_bit(l)) total += size(l).a;
      if (s & abar_bit(l)) total += size(l).abar;
      if (s & delta_bit(l)) total += size(l).delta;
    }
    return total;
  }

  // Every operation that can run from `s`, written from Table 1 independently of simulate_chain.
  std::vector<Step> steps(State s) const {
    std::vector<Step> out;
    const int64_t now = bytes(s);
    for (int l = 1; l <= n_; ++l) {
      const ChainStage& st = chain_.stages[static_cast<size_t>(l - 1)];
      const bool input = (s & (a_bit(l - 1) | abar_bit(l - 1))) != 0;
      if (!input) continue;
      for (ChainOpKind kind : {ChainOpKind::kForwardCheckpoint, ChainOpKind::kForwardNoSave,
                               ChainOpKind::kForwardAll}) {
        const State out_bit = kind == ChainOpKind::kForwardAll ? abar_bit(l) : a_bit(l);
        const int64_t out_size = kind == ChainOpKind::kForwardAll ? size(l).abar : size(l).a;
        State next = s | out_bit;
        if (kind == ChainOpKind::kForwardNoSave && !(s & abar_bit(l))) next &= ~a_bit(l - 1);
        out.push_back({next, now + ((s & out_bit) ? 0 : out_size) + st.o_f, st.u_f, {kind, l}});
      }
      if ((s & delta_bit(l)) && (s & abar_bit(l))) {
        const State next = (s & ~delta_bit(l) & ~abar_bit(l) & ~a_bit(l - 1)) | delta_bit(l - 1);
        const int64_t memory = now + ((s & delta_bit(l - 1)) ? 0 : size(l - 1).delta) + st.o_b;
        out.push_back({next, memory, st.u_b, {ChainOpKind::kBackward, l}});
      }
    }
    return out;
  }

 private:
  ChainSizes size(int l) const {
    return l == 0 ? chain_.input : chain_.stages[static_cast<size_t>(l - 1)].sizes;
  }
  const Chain& chain_;
  int n_;
};

struct BruteForce {
  double makespan = -1;  // -1: no sequence fits
  ChainSequence ops;
};

// Least makespan within `budget` (Dijkstra; times are >= 0).
BruteForce least_makespan(const Chain& chain, int64_t budget) {
  const StateSpace space(chain);
  std::vector<double> dist(kStates, -1);
  std::vector<std::pair<State, ChainOp>> parent(kStates);
  using Item = std::pair<double, State>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
  dist[space.start()] = 0;
  queue.push({0, space.start()});
  while (!queue.empty()) {
    const auto [d, s] = queue.top();
    queue.pop();
    if (d > dist[s]) continue;
    if (space.done(s)) {
      BruteForce result{d, {}};
      for (State at = s; at != space.start(); at = parent[at].first)
        result.ops.insert(result.ops.begin(), parent[at].second);
      return result;
    }
    for (const Step& step : space.steps(s)) {
      if (step.memory > budget) continue;
      const double nd = d + step.time;
      if (dist[step.next] < 0 || nd < dist[step.next]) {
        dist[step.next] = nd;
        parent[step.next] = {s, step.op};
        queue.push({nd, step.next});
      }
    }
  }
  return {};
}

// Least peak of any valid sequence (bottleneck Dijkstra).
int64_t least_peak(const Chain& chain) {
  const StateSpace space(chain);
  std::vector<int64_t> best(kStates, -1);
  using Item = std::pair<int64_t, State>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
  best[space.start()] = 0;
  queue.push({0, space.start()});
  while (!queue.empty()) {
    const auto [peak, s] = queue.top();
    queue.pop();
    if (peak > best[s]) continue;
    if (space.done(s)) return peak;
    for (const Step& step : space.steps(s)) {
      const int64_t np = std::max(peak, step.memory);
      if (best[step.next] < 0 || np < best[step.next]) {
        best[step.next] = np;
        queue.push({np, step.next});
      }
    }
  }
  return -1;
}

ChainSolveResult solve(const Chain& chain, std::string_view solver, int64_t budget,
                       std::string persistence = "strong") {
  SolveOptions options;
  options.budget = {budget};
  options.params = {{"bins", "exact"}};
  if (solver == "rotor") options.params["persistence"] = persistence;
  return solve(chain, solver, options);
}

// Random tiny chain; odd seeds also draw δ sizes apart from a sizes (ω_δ != ω_a).
Chain tiny_chain(int seed) {
  Chain chain = generate_chain({.kind = "random",
                                .length = 1 + seed % 4,
                                .seed = static_cast<uint64_t>(seed),
                                .min_size = seed % 3 == 0 ? 0 : 1,
                                .max_size = 6,
                                .max_time = 5});
  if (seed % 2 == 1) {
    Rng rng(static_cast<uint64_t>(seed) * 7919);
    chain.input.delta = rng.between(0, 6);
    for (size_t i = 0; i + 1 < chain.stages.size(); ++i)
      chain.stages[i].sizes.delta = rng.between(0, 6);
  }
  return chain;
}

class BruteForceTest : public ::testing::TestWithParam<int> {};

TEST_P(BruteForceTest, WeakDpMatchesBruteForce) {
  const int seed = GetParam();
  const Chain chain = tiny_chain(seed);
  const int64_t lowest = least_peak(chain);
  ASSERT_GT(lowest, 0);
  const int64_t store_all = simulate_chain(chain, store_all_sequence(chain)).peak_bytes;
  // Below the least peak: the weak DP proves infeasibility and names that budget.
  const ChainSolveResult below = solve(chain, "rotor", lowest - 1, "weak");
  EXPECT_EQ(below.plan.stats.status, SolveStatus::kInfeasible);
  EXPECT_EQ(below.plan.stats.min_feasible_budget, lowest);
  for (int64_t budget = lowest; budget <= store_all; budget += 1 + (store_all - lowest) / 5) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " budget " << budget);
    const BruteForce brute = least_makespan(chain, budget);
    ASSERT_GE(brute.makespan, 0);
    const ChainEvaluation brute_eval = simulate_chain(chain, brute.ops);  // cross-checks Table 1
    ASSERT_TRUE(brute_eval.valid) << brute_eval.error;
    EXPECT_DOUBLE_EQ(brute_eval.cost, brute.makespan);
    EXPECT_LE(brute_eval.peak_bytes, budget);

    const ChainSolveResult weak = solve(chain, "rotor", budget, "weak");
    EXPECT_EQ(weak.plan.stats.status, SolveStatus::kOptimal);
    EXPECT_LE(weak.eval.peak_bytes, budget);
    EXPECT_DOUBLE_EQ(weak.eval.cost, brute.makespan)
        << "weak: " << format_sequence(weak.plan.sequence)
        << "\nbrute: " << format_sequence(brute.ops);

    const ChainSolveResult strong = solve(chain, "rotor", budget);
    if (strong.eval.peak_bytes <= budget) {
      EXPECT_GE(strong.eval.cost, weak.eval.cost);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RandomTinyChains, BruteForceTest, ::testing::Range(1, 201));

}  // namespace
}  // namespace remat::rotor
