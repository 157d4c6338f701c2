// libFuzzer target: the solvers. The input is a remat-graph (or remat-chain) JSON text, and a hash
// of it picks the budget (so the readers' seed files serve as they are); a problem the reader
// accepts is solved by every registry row that takes its kind, through the judged solve, under a
// tiny work limit. Each row either refuses the problem
// (InputError: a kind or structure it does not take) or returns a plan that re-simulates to the
// judge's figures, is valid, has the status its peak says, and is never worse than the default
// schedule (store-all on a chain). Problems above kMaxNodes nodes are skipped: they only slow the
// fuzzer down.
#include <algorithm>
#include <cstdint>

#include "fuzz_common.h"
#include "remat/io.h"
#include "remat/registry.h"
#include "remat/simulate.h"

namespace remat::fuzz {
namespace {

constexpr int32_t kMaxNodes = 120;
constexpr int kMaxChainLength = 40;

SolveOptions options_for(int64_t budget) {
  SolveOptions options;
  options.budget = {budget};
  options.work_limit = 0.005;
  // A backstop above any run of this work (libFuzzer's -timeout reports a hang).
  options.time_limit_s = 5;
  return options;
}

// Budgets between just below the lower bound and just above the default's peak.
int64_t budget_between(uint8_t selector, int64_t lower, int64_t peak) {
  if (selector == 0) return std::max<int64_t>(0, lower - 1);
  if (selector == 255) return peak + 1;
  return lower + static_cast<int64_t>(static_cast<double>(peak - lower) * selector / 255.0);
}

// The judge's invariants for one plan: `e` is the plan re-simulated here, `fallback` the default
// schedule's (store-all's) figures.
template <class Result, class Eval>
void check_plan(const Result& r, const Eval& e, int64_t budget, PlanScore fallback,
                bool minimises_cost) {
  require(e.valid, "the plan is valid");
  require(e.peak_bytes == r.eval.peak_bytes && e.cost == r.eval.cost,
          "the judge's figures are the simulator's");
  const bool fits = e.peak_bytes <= budget;
  const SolveStatus s = r.plan.stats.status;
  require(fits == (s == SolveStatus::kOptimal || s == SolveStatus::kFeasible),
          "the status follows the simulated peak");
  require(!better_plan(fallback, {e.peak_bytes, e.cost}, budget) || (!minimises_cost && fits),
          "never worse than the default schedule");
}

void solve_graph(std::string_view text, uint8_t selector) {
  const Graph g = parse_graph_json(text, "fuzz.json");
  if (g.num_nodes() > kMaxNodes) return;
  const Baseline base = baseline(g);
  const int64_t budget = budget_between(selector, memory_lower_bound(g), base.peak_bytes);
  for (const SolverEntry& row : solver_registry()) {
    if (!row.accepts.graph) continue;
    expect_value_or_input_error([&] {
      const SolveResult r = solve(g, row, options_for(budget));
      check_plan(r, simulate(g, r.plan.sequence), budget, {base.peak_bytes, base.cost},
                 row.minimises_cost);
    });
  }
}

void solve_chain(std::string_view text, uint8_t selector) {
  const Chain chain = parse_chain_json(text, "fuzz.json");
  if (chain.length() > kMaxChainLength) return;
  const ChainEvaluation store_all = simulate_chain(chain, store_all_sequence(chain));
  const int64_t budget = budget_between(selector, 0, store_all.peak_bytes);
  for (const SolverEntry& row : solver_registry()) {
    if (!row.accepts.chain) continue;
    expect_value_or_input_error([&] {
      const ChainSolveResult r = solve(chain, row, options_for(budget));
      check_plan(r, simulate_chain(chain, r.plan.sequence), budget,
                 {store_all.peak_bytes, store_all.cost}, row.minimises_cost);
    });
  }
}

}  // namespace
}  // namespace remat::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = remat::fuzz::as_text(data, size);
  uint32_t hash = 2166136261u;  // FNV-1a
  for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 16777619u;
  const auto selector = static_cast<uint8_t>(hash ^ (hash >> 8) ^ (hash >> 16) ^ (hash >> 24));
  remat::fuzz::expect_value_or_input_error([&] {
    if (text.find("remat-chain") != std::string_view::npos)
      remat::fuzz::solve_chain(text, selector);
    else
      remat::fuzz::solve_graph(text, selector);
  });
  return 0;
}
