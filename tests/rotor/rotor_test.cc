// Rotor golden results (Table 2, Fig. 4), the chain simulator by hand, the chain baselines, and
// properties of the DPs on generated chains. Every makespan and peak checked comes from
// simulate_chain (through solve_chain), never from a DP's own value.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "remat/error.h"
#include "remat/generate.h"
#include "remat/io.h"
#include "remat/registry.h"

namespace remat::rotor {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

Chain toy_chain() {
  return read_chain_file(std::string(REMAT_SOURCE_DIR) + "/examples/rotor_toy.json");
}

ChainSolveResult run(const Chain& chain, std::string_view solver, int64_t budget,
                     ParamMap params = {}) {
  SolveOptions options;
  options.budget = {budget};
  options.params = std::move(params);
  ChainSolveResult r = solve(chain, solver, options);
  EXPECT_TRUE(r.eval.valid) << r.eval.error;
  return r;
}

double dp_makespan(const ChainSolveResult& r) {
  const std::optional<double> v = r.plan.stats.counter("dp_makespan");
  return v ? *v : -1;
}

// Fig. 4 of the paper: L = n + 2, u_f^1 = k = n - 2, u_f^2 = 2, other times 0; ω_a = 3 except
// ω_a^0 = ω_a^{L+1} = 0, ω_a^1 = 1, ω_a^L = 4; ω_ā = ω_δ = ω_a; M = 15.
Chain figure4_chain(int n) {
  const int length = n + 2;
  auto size = [&](int l) -> int64_t {
    if (l == 0 || l == length + 1) return 0;
    if (l == 1) return 1;
    return l == length ? 4 : 3;
  };
  Chain chain;
  chain.name = "fig4";
  chain.input = {0, 0, 0};
  for (int l = 1; l <= length + 1; ++l) {
    ChainStage s;
    s.u_f = l == 1 ? n - 2 : (l == 2 ? 2 : 0);
    s.sizes = {size(l), size(l), size(l)};
    chain.stages.push_back(s);
  }
  return chain;
}

TEST(RotorGolden, Table2StoreAll) {
  // §3.2: no re-materialization: 37.4 ms, about 107 MB, peak at B^5.
  const ChainSolveResult r = run(toy_chain(), "store-all", 200 * kMiB);
  EXPECT_NEAR(r.eval.cost, 37.4, 0.05);
  EXPECT_NEAR(static_cast<double>(r.eval.peak_bytes) / kMiB, 107.0, 0.05);
  EXPECT_EQ(r.plan.sequence[static_cast<size_t>(r.eval.peak_step)],
            (ChainOp{ChainOpKind::kBackward, 5}));
}

TEST(RotorGolden, Table2At90MiB) {
  // §3.2: the optimal sequence at M = 90 MB (MiB in the paper's units): 47.4 ms, 86.8 MB.
  const Chain chain = toy_chain();
  for (const char* persistence : {"strong", "weak"}) {
    const ChainSolveResult r = run(chain, "rotor", 90 * kMiB, {{"persistence", persistence}});
    EXPECT_EQ(format_sequence(r.plan.sequence),
              "F1ck F2∅ F3∅ F4all F5all F6all F7all B7 B6 B5 B4 F1ck F2∅ F3all B3 F1all F2all B2 "
              "B1");
    EXPECT_NEAR(r.eval.cost, 47.4, 0.05);
    EXPECT_NEAR(static_cast<double>(r.eval.peak_bytes) / kMiB, 86.8, 0.05);
    EXPECT_EQ(r.plan.sequence[static_cast<size_t>(r.eval.peak_step)],
              (ChainOp{ChainOpKind::kBackward, 5}));
    EXPECT_NEAR(dp_makespan(r), r.eval.cost, 1e-5);
  }
}

TEST(RotorGolden, Figure4CounterExample) {
  // §4.1 with k = n - 2: every persistent sequence takes 3n - 2, the weak DP finds 2n + 2.
  for (int n = 4; n <= 9; ++n) {
    SCOPED_TRACE(::testing::Message() << "n = " << n);
    const Chain chain = figure4_chain(n);
    const ChainSolveResult strong = run(chain, "rotor", 15, {{"bins", "exact"}});
    const ChainSolveResult weak =
        run(chain, "rotor", 15, {{"bins", "exact"}, {"persistence", "weak"}});
    EXPECT_EQ(strong.eval.cost, 3 * n - 2);
    EXPECT_EQ(weak.eval.cost, 2 * n + 2);
    EXPECT_LE(strong.eval.peak_bytes, 15);
    EXPECT_LE(weak.eval.peak_bytes, 15);
    EXPECT_EQ(weak.plan.stats.status, SolveStatus::kOptimal);
  }
}

TEST(ChainSimulator, ByHand) {
  // a^0 = 2, stage 1: a 3 ā 5 δ 3, o_f 1, o_b 2; loss: all 0; δ^0 = 2.
  Chain chain;
  chain.input = {2, 2, 2};
  chain.stages = {{"f", 1.5, 2.5, {3, 5, 3}, 1, 2}, {"loss", 0, 0, {0, 0, 0}, 0, 0}};
  const ChainSequence ops = {{ChainOpKind::kForwardCheckpoint, 1},
                             {ChainOpKind::kForwardAll, 1},
                             {ChainOpKind::kForwardAll, 2},
                             {ChainOpKind::kBackward, 2},
                             {ChainOpKind::kBackward, 1}};
  const ChainEvaluation e = simulate_chain(chain, ops);
  ASSERT_TRUE(e.valid) << e.error;
  EXPECT_DOUBLE_EQ(e.cost, 1.5 + 1.5 + 2.5);
  // F1ck: a0 2 + a1 3 + o_f 1 = 6. F1all: + ā1 5 = 11. F2all (loss, sizes 0): 10.
  // B2: 10 + δ1 3 = 13, then frees a1 (its a^{ℓ-1}). B1: a0 2 + ā1 5 + δ1 3 + δ0 2 + o_b 2 = 14.
  EXPECT_EQ(e.timeline, (std::vector<int64_t>{6, 11, 10, 13, 14}));
  EXPECT_EQ(e.peak_bytes, 14);
  EXPECT_EQ(e.peak_step, 4);
}

TEST(ChainSimulator, Errors) {
  const Chain chain = toy_chain();
  EXPECT_EQ(simulate_chain(chain, {{{ChainOpKind::kForwardAll, 2}}}).error,
            "op 0 (F2all): a^1 is not in memory");
  EXPECT_EQ(
      simulate_chain(chain, {{{ChainOpKind::kForwardCheckpoint, 1}, {ChainOpKind::kBackward, 1}}})
          .error,
      "op 1 (B1): δ^1 is not in memory");
  EXPECT_EQ(simulate_chain(chain, {{{ChainOpKind::kForwardNoSave, 9}}}).error,
            "op 0 (F9∅): stage must be in 1..7");
  EXPECT_EQ(simulate_chain(chain, {{{ChainOpKind::kForwardAll, 1}}}).error,
            "the sequence ends without computing δ^0 (B1 never runs)");
  // F_∅ frees its input, so the F2all after it fails.
  EXPECT_EQ(
      simulate_chain(chain, {{{ChainOpKind::kForwardNoSave, 1}, {ChainOpKind::kForwardAll, 1}}})
          .error,
      "op 1 (F1all): a^0 is not in memory");
}

TEST(ChainBaselines, SequentialIsCheckpointSequential) {
  // L = 6, k = 2: segments 1..3 (checkpointed) and 4..6 + loss.
  const Chain chain = toy_chain();
  const ChainSolveResult r = run(chain, "sequential", 200 * kMiB, {{"segments", "2"}});
  EXPECT_EQ(format_sequence(r.plan.sequence),
            "F1ck F2∅ F3∅ F4all F5all F6all F7all B7 B6 B5 B4 F1all F2all F3all B3 B2 B1");
  // k = 4: floor(6/4) = 1 stage per checkpointed segment, the last takes 4..6.
  const ChainSolveResult r4 = run(chain, "sequential", 200 * kMiB, {{"segments", "4"}});
  EXPECT_EQ(format_sequence(r4.plan.sequence),
            "F1ck F2ck F3ck F4all F5all F6all F7all B7 B6 B5 B4 F3all B3 F2all B2 F1all B1");
}

TEST(ChainBaselines, SequentialKeepsTheFastestSegmentCountWithinBudget) {
  const Chain chain = generate_chain({.kind = "resnet", .length = 36, .seed = 7});
  const int64_t store_all = simulate_chain(chain, store_all_sequence(chain)).peak_bytes;
  for (int i = 2; i <= 5; ++i) {
    const int64_t budget = store_all * i / 6;
    const ChainSolveResult best = run(chain, "sequential", budget);
    double fastest = -1;
    for (int k = 2; k <= 12; ++k) {  // 2..floor(2 sqrt(36))
      const ChainSolveResult r =
          run(chain, "sequential", budget, {{"segments", std::to_string(k)}});
      if (r.eval.peak_bytes <= budget && (fastest < 0 || r.eval.cost < fastest))
        fastest = r.eval.cost;
    }
    if (fastest < 0) {
      EXPECT_GT(best.eval.peak_bytes, budget);
      EXPECT_EQ(best.plan.stats.min_feasible_budget, best.eval.peak_bytes);
    } else {
      EXPECT_EQ(best.eval.cost, fastest) << "budget " << budget;
    }
  }
}

TEST(ChainBaselines, RevolveRunsFallRightBeforeB) {
  const ChainSolveResult r = run(toy_chain(), "revolve", 90 * kMiB);
  EXPECT_LE(r.eval.peak_bytes, 90 * kMiB);
  for (size_t i = 0; i < r.plan.sequence.size(); ++i)
    if (r.plan.sequence[i].kind == ChainOpKind::kForwardAll && r.plan.sequence[i].stage <= 6) {
      ASSERT_LT(i + 1, r.plan.sequence.size());
      EXPECT_EQ(r.plan.sequence[i + 1], (ChainOp{ChainOpKind::kBackward, r.plan.sequence[i].stage}))
          << format_sequence(r.plan.sequence);
    }
}

// The DP never loses to a baseline at that baseline's own peak (same memory, exact bins).
void expect_dp_not_worse(const Chain& chain, ParamMap dp_params, std::string_view where) {
  SCOPED_TRACE(where);
  const int64_t store_all = simulate_chain(chain, store_all_sequence(chain)).peak_bytes;
  for (int k = 2; k <= std::max(2, static_cast<int>(2 * std::sqrt(chain.length()))); ++k) {
    if (k > chain.length()) break;
    const ChainSolveResult seq =
        run(chain, "sequential", store_all, {{"segments", std::to_string(k)}});
    const ChainSolveResult dp = run(chain, "rotor", seq.eval.peak_bytes, dp_params);
    EXPECT_LE(dp.eval.peak_bytes, seq.eval.peak_bytes);
    EXPECT_LE(dp.eval.cost, seq.eval.cost + 1e-9) << "k = " << k;
  }
  for (int i = 1; i <= 4; ++i) {
    const int64_t budget = store_all * i / 4;
    ParamMap revolve_params;
    if (dp_params.contains("bins")) revolve_params["bins"] = dp_params["bins"];
    const ChainSolveResult rev = run(chain, "revolve", budget, revolve_params);
    if (rev.eval.peak_bytes > budget) continue;
    const ChainSolveResult dp = run(chain, "rotor", rev.eval.peak_bytes, dp_params);
    EXPECT_LE(dp.eval.cost, rev.eval.cost + 1e-9) << "budget " << budget;
  }
}

TEST(ChainBaselines, DpNeverWorseThanSequentialOrRevolve) {
  // Exactly at a baseline's peak, sizes rounded up to bins may miss its plan: exact bytes here.
  expect_dp_not_worse(toy_chain(), {{"bins", "exact"}}, "toy, exact bytes");
  for (int seed = 1; seed <= 6; ++seed) {
    const Chain chain = generate_chain({.kind = "random",
                                        .length = 6 + seed,
                                        .seed = uint64_t(seed),
                                        .max_size = 40,
                                        .max_time = 9});
    expect_dp_not_worse(chain, {{"bins", "exact"}}, chain.name);
  }
  expect_dp_not_worse(generate_chain({.kind = "resnet", .length = 30}), {{"bins", "2000"}},
                      "resnet-like L = 30");
}

TEST(RotorProperties, PersistentNeverBeatsWeakAndBothFit) {
  for (int seed = 1; seed <= 12; ++seed) {
    const Chain chain = generate_chain(
        {.kind = "random", .length = 4 + seed % 7, .seed = uint64_t(100 + seed), .max_size = 30});
    const int64_t store_all = simulate_chain(chain, store_all_sequence(chain)).peak_bytes;
    for (int i = 1; i <= 4; ++i) {  // below store-all's peak (which fits: store-all returned)
      const int64_t budget = store_all * i / 5;
      SCOPED_TRACE(::testing::Message() << chain.name << " budget " << budget);
      const ChainSolveResult strong = run(chain, "rotor", budget, {{"bins", "exact"}});
      const ChainSolveResult weak =
          run(chain, "rotor", budget, {{"bins", "exact"}, {"persistence", "weak"}});
      ASSERT_TRUE(weak.plan.stats.min_feasible_budget.has_value());
      if (budget < *weak.plan.stats.min_feasible_budget) {
        EXPECT_EQ(weak.plan.stats.status, SolveStatus::kInfeasible);
        EXPECT_GT(strong.eval.peak_bytes, budget);
        continue;
      }
      EXPECT_LE(weak.eval.peak_bytes, budget);
      EXPECT_NEAR(dp_makespan(weak), weak.eval.cost, 1e-9);
      if (strong.eval.peak_bytes <= budget) {
        EXPECT_GE(strong.eval.cost, weak.eval.cost);
        EXPECT_NEAR(dp_makespan(strong), strong.eval.cost, 1e-5);
      }
    }
  }
}

TEST(RotorProperties, ExactFrontsMatchOneByteBins) {
  // bins=exact runs the persistent DP on Pareto fronts; bins = budget gives one-byte bins in the
  // table DP. Both are exact, so they must agree (revolve too), and on the toy in bytes.
  for (int seed = 1; seed <= 10; ++seed) {
    const Chain chain = generate_chain(
        {.kind = "random", .length = 3 + seed, .seed = uint64_t(seed), .max_size = 25});
    const int64_t store_all = simulate_chain(chain, store_all_sequence(chain)).peak_bytes;
    for (int i = 1; i <= 4; ++i) {
      const int64_t budget = store_all * i / 4;
      for (const char* solver : {"rotor", "revolve"}) {
        const ChainSolveResult fronts = run(chain, solver, budget, {{"bins", "exact"}});
        const ChainSolveResult table =
            run(chain, solver, budget, {{"bins", std::to_string(budget)}});
        EXPECT_EQ(fronts.eval.cost, table.eval.cost) << chain.name << " " << budget;
        EXPECT_EQ(fronts.eval.peak_bytes <= budget, table.eval.peak_bytes <= budget);
      }
    }
  }
  const ChainSolveResult toy = run(toy_chain(), "rotor", 90 * kMiB, {{"bins", "exact"}});
  EXPECT_NEAR(toy.eval.cost, 47.42, 1e-9);
  EXPECT_EQ(toy.plan.stats.status, SolveStatus::kFeasible);
}

TEST(RotorProperties, BinnedPlansFitInBytes) {
  // Sizes are rounded up to bins, so what fits in bins fits in bytes, for any bin count.
  const Chain chain = generate_chain({.kind = "resnet", .length = 25, .seed = 3});
  const int64_t store_all = simulate_chain(chain, store_all_sequence(chain)).peak_bytes;
  for (const char* bins : {"7", "50", "500"})
    for (int i = 1; i <= 6; ++i) {
      const int64_t budget = store_all * i / 6;
      for (const char* persistence : {"strong", "weak"}) {
        const ChainSolveResult r =
            run(chain, "rotor", budget, {{"bins", bins}, {"persistence", persistence}});
        if (budget >= *r.plan.stats.min_feasible_budget) {
          EXPECT_LE(r.eval.peak_bytes, budget) << bins << " bins, " << persistence;
        }
      }
    }
}

TEST(RotorProperties, InfeasibleBudgetNamesTheLeastBudget) {
  const Chain chain = toy_chain();
  const ChainSolveResult r = run(chain, "rotor", 50 * kMiB);
  EXPECT_EQ(r.plan.stats.status, SolveStatus::kOverBudget);
  ASSERT_TRUE(r.plan.stats.min_feasible_budget.has_value());
  const int64_t least = *r.plan.stats.min_feasible_budget;
  EXPECT_GT(least, 50 * kMiB);
  // The named budget is met: the plan returned has exactly that peak.
  EXPECT_EQ(r.eval.peak_bytes, least);
  EXPECT_LE(run(chain, "rotor", least).eval.peak_bytes, least);
}

TEST(RotorProperties, TimeLimitReturnsTheLeastBudgetPlan) {
  // A DP stopped by the time limit still returns a valid plan: the least-budget sequence.
  const Chain chain = generate_chain({.kind = "resnet", .length = 60, .seed = 2});
  const int64_t store_all = simulate_chain(chain, store_all_sequence(chain)).peak_bytes;
  for (const char* persistence : {"strong", "weak"}) {
    SolveOptions options;
    options.budget = {store_all / 2};
    options.time_limit_s = 1e-9;
    options.params = {{"persistence", persistence}};
    const ChainSolveResult r = solve(chain, "rotor", options);
    EXPECT_TRUE(r.eval.valid);
    EXPECT_EQ(r.plan.stats.stop_reason, StopReason::kTimeLimit) << persistence;
    EXPECT_LE(r.eval.peak_bytes, store_all / 2);
  }
}

TEST(RotorProperties, Deterministic) {
  const Chain chain = generate_chain({.kind = "resnet", .length = 40, .seed = 5});
  const int64_t budget = simulate_chain(chain, store_all_sequence(chain)).peak_bytes / 3;
  for (const char* solver : {"rotor", "revolve", "sequential"})
    EXPECT_EQ(run(chain, solver, budget).plan.sequence, run(chain, solver, budget).plan.sequence)
        << solver;
}

TEST(RotorParams, BadParametersAreInputErrors) {
  const Chain chain = toy_chain();
  auto message = [&](std::string_view solver, ParamMap params) {
    try {
      run(chain, solver, 90 * kMiB, std::move(params));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("rotor", {{"persistance", "weak"}}),
            "rotor: unknown parameter 'persistance' (known: persistence, bins)");
  EXPECT_EQ(message("rotor", {{"persistence", "medium"}}),
            "rotor: invalid value 'medium' for parameter 'persistence' (expected strong or weak)");
  EXPECT_EQ(message("rotor", {{"bins", "0"}}),
            "rotor: invalid value '0' for parameter 'bins' (expected a positive integer or "
            "'exact')");
  EXPECT_EQ(message("sequential", {{"segments", "9"}}),
            "sequential: invalid value '9' for parameter 'segments' (expected 1..6, the chain "
            "length, or 0 for the best of 2..2√L)");
  EXPECT_EQ(message("rotr", {}).substr(0, 40), "unknown solver 'rotr' (known: auto, none");
  EXPECT_EQ(message("fastsa", {}).substr(0, 53),
            "solver 'fastsa' takes graphs, not chains (chain solve");
  // The weak DP's exact bins on byte-sized chains would need a huge table: refused, not attempted.
  EXPECT_NE(message("rotor", {{"bins", "exact"}, {"persistence", "weak"}})
                .find("use fewer bins than bins=exact"),
            std::string::npos);
}

TEST(ChainPlanJson, RoundTrip) {
  const Chain chain = toy_chain();
  const ChainSolveResult r = run(chain, "rotor", 90 * kMiB);
  const std::string text = chain_plan_to_json(chain, r, {90 * kMiB});
  EXPECT_EQ(parse_chain_plan_json(text, "plan.json"), r.plan.sequence);
  EXPECT_NE(text.find("\"format\": \"remat-chain-plan\""), std::string::npos);
  auto error_of = [](std::string_view text) {
    try {
      parse_chain_plan_json(text, "p.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(R"({"format": "remat-chain-plan", "version": 1,
                        "ops": [{"op": "F_x", "stage": 1}]})"),
            "p.json: op 0: field 'op' names an unknown op \"F_x\" (known: F_ck, F_none, F_all, "
            "B)");
  // Through io's JSON reader: a syntax error names the line and column.
  EXPECT_NE(error_of("{\"format\": \"remat-chain-plan\",\n \"ops\": [}").find("p.json:2:"),
            std::string::npos)
      << error_of("{\"format\": \"remat-chain-plan\",\n \"ops\": [}");
}

}  // namespace
}  // namespace remat::rotor
