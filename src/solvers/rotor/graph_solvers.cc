// Chain solvers on graphs: extract, solve the chain, lower, judge (chain_family.h).
#include <fmt/format.h>

#include <algorithm>

#include "chain_family.h"
#include "remat/error.h"
#include "remat/lower.h"
#include "remat/simulate.h"

namespace remat::rotor {
namespace {

constexpr int kMaxBudgetRetries = 3;
constexpr int kBudgetSearchSteps = 6;

std::vector<StageRun> stage_runs(std::span<const ChainOp> ops) {
  std::vector<StageRun> runs;
  runs.reserve(ops.size());
  for (const ChainOp& op : ops) runs.push_back({op.stage, op.kind == ChainOpKind::kBackward});
  return runs;
}

// The chain plan and the chain simulator's verdict on it.
struct ChainAttempt {
  ChainPlan plan;
  ChainEvaluation eval;
};

struct Attempt {
  Sequence sequence;
  Evaluation eval;
  ChainAttempt chain;
  int64_t chain_budget = 0;
};

bool better(const Attempt& a, const Attempt& b, int64_t budget) {
  return better_plan({a.eval.peak_bytes, a.eval.cost}, {b.eval.peak_bytes, b.eval.cost}, budget);
}

// The graph rows' own parameter, beside their chain solver's table.
struct ExtractParams {
  int64_t max_stages = ChainExtractOptions{}.max_stages;
};
constexpr ParamInfo kMaxStagesInfo = {
    "max_stages", "100", "stages",
    "graphs only: most stages of the extracted chain (consecutive stages merged beyond it)"};

// Why the chain has one stage with most of the forward (lower.h): a plan made on it is not a
// result that looks like one.
void add_chain_note(const GraphChain& gc, SolveStats& st) {
  if (!gc.note.empty()) st.lists.emplace_back("notes", std::vector<std::string>{gc.note});
}

}  // namespace

std::vector<ParamInfo> with_max_stages(std::span<const ParamInfo> chain_rows) {
  std::vector<ParamInfo> rows(chain_rows.begin(), chain_rows.end());
  rows.push_back(kMaxStagesInfo);
  return rows;
}

Plan ChainFamilySolver::solve(const Graph& graph, const SolveOptions& options) {
  const std::string_view name = this->name();
  const std::span<const ParamInfo> rows = params();
  const ParamTable<ExtractParams> extract_table(
      name, {{kMaxStagesInfo, integer(&ExtractParams::max_stages, 2, 1 << 20)}});
  Limits limits(options.work_limit, options.time_limit_s);
  ParamMap chain_params = options.params;
  ParamMap extract_params;
  for (const auto& [key, text] : options.params) {
    if (std::none_of(rows.begin(), rows.end(), [&](const ParamInfo& p) { return p.key == key; }))
      throw_unknown_param(name, key, rows);
    if (key == kMaxStagesInfo.key) extract_params[key] = text;
  }
  chain_params.erase(std::string(kMaxStagesInfo.key));
  ChainExtractOptions extract;
  extract.max_stages = static_cast<int32_t>(extract_table.parse(extract_params).max_stages);
  const GraphChain gc = extract_chain(graph, extract);
  const int64_t budget = options.budget.bytes;
  // Every node once is the least cost there is: when it fits, no chain solve can do better
  // (the binned DP rounds sizes up and may miss it at a budget right at the baseline peak).
  Sequence store_all = lower_chain_plan(graph, gc, store_all_runs(gc));
  if (simulate(graph, store_all).peak_bytes <= budget) {
    Plan plan;
    plan.sequence = std::move(store_all);
    plan.stats.add_counter("stages", static_cast<double>(gc.chain.stages.size()));
    plan.stats.add_counter("store_all", 1);
    add_chain_note(gc, plan.stats);
    return plan;
  }

  auto attempt_at = [&](int64_t at_budget) {
    SolveOptions chain_options = options;
    chain_options.budget = {at_budget};
    chain_options.time_limit_s = std::max(1e-3, limits.seconds_left());
    chain_options.work_limit = std::max(1e-9, limits.left());
    chain_options.params = chain_params;
    chain_options.start.clear();
    Attempt a;
    a.chain.plan = solve_chain(gc.chain, chain_options);
    limits.spend(a.chain.plan.stats.work);
    a.chain.eval = simulate_chain(gc.chain, a.chain.plan.sequence);
    REMAT_CHECK(a.chain.eval.valid,
                fmt::format("{}: invalid chain plan: {}", name, a.chain.eval.error));
    a.chain_budget = at_budget;
    a.sequence = lower_chain_plan(graph, gc, stage_runs(a.chain.plan.sequence));
    a.eval = simulate(graph, a.sequence);
    REMAT_CHECK(a.eval.valid,
                fmt::format("{}: the lowered chain plan is invalid: {}", name, a.eval.error));
    return a;
  };

  Attempt best;
  bool have = false;
  int retries = 0, searches = 0;
  int64_t chain_budget = std::max<int64_t>(0, budget - gc.resident_bytes);
  for (int attempt = 0; attempt <= kMaxBudgetRetries; ++attempt) {
    Attempt a = attempt_at(chain_budget);
    const int64_t peak = a.eval.peak_bytes;
    const bool chain_fits = a.chain.eval.peak_bytes <= chain_budget;
    if (!have || better(a, best, budget)) best = std::move(a), have = true;
    // Retry only when the chain plan fit but its lowering did not: the chain's accounting
    // missed something the simulator sees, so ask the chain for that much less.
    if (peak <= budget || !chain_fits || limits.stop()) break;
    chain_budget -= peak - budget;
    if (chain_budget < 0 || attempt == kMaxBudgetRetries) break;
    ++retries;
  }
  // The chain over-counts (ā^ℓ holds a^ℓ until B^ℓ, δ values crossing several boundaries, the
  // gradients charged to every later stage), by at most its excess at store-all; a larger
  // chain budget may still lower within the budget, and cheaper. Bisect, keeping the best.
  if (best.eval.peak_bytes <= budget) {
    const int64_t excess = simulate_chain(gc.chain, store_all_sequence(gc.chain)).peak_bytes +
                           gc.resident_bytes - baseline(graph).peak_bytes;
    int64_t lo = best.chain_budget, hi = best.chain_budget + std::max<int64_t>(excess, 0);
    for (int i = 0; i < kBudgetSearchSteps && hi - lo > 1 && !limits.stop(); ++i) {
      const int64_t mid = lo + (hi - lo) / 2;
      Attempt a = attempt_at(mid);
      ++searches;
      const bool fits = a.eval.peak_bytes <= budget;
      if (better(a, best, budget)) best = std::move(a);
      (fits ? lo : hi) = mid;
    }
  }

  Plan plan;
  plan.stats.status = SolveStatus::kFeasible;  // the judged solve sets it from the simulator
  const Baseline base = baseline(graph);
  const bool fits = best.eval.peak_bytes <= budget;
  if (!fits && best.eval.peak_bytes >= base.peak_bytes) {
    plan.sequence = default_schedule(graph);  // never worse than the default schedule
    plan.stats.add_counter("used_default_schedule", 1);
  } else {
    plan.sequence = std::move(best.sequence);
  }
  SolveStats& st = plan.stats;
  st.stopped(best.chain.plan.stats.stop_reason);
  st.stopped(limits.reason());  // the budget search was cut short
  st.work = limits.spent();
  st.add_counter("stages", static_cast<double>(gc.chain.stages.size()));
  st.add_counter("separator_candidates", gc.separator_candidates);
  st.add_counter("resident_bytes", static_cast<double>(gc.resident_bytes));
  st.add_counter("fixed_cost", gc.fixed_cost);
  st.add_counter("chain_budget", static_cast<double>(best.chain_budget));
  st.add_counter("chain_peak", static_cast<double>(best.chain.eval.peak_bytes));
  st.add_counter("chain_makespan", best.chain.eval.cost);
  st.add_counter("budget_retries", retries);
  st.add_counter("budget_search_solves", searches);
  for (const auto& [key, value] : best.chain.plan.stats.counters)
    st.add_counter("chain." + key, value);
  std::vector<std::string> separators;
  for (NodeId n : gc.separators) separators.push_back(graph.node(n).name);
  st.lists.emplace_back("separators", std::move(separators));
  st.lists.emplace_back("chain_ops",
                        std::vector<std::string>{format_sequence(best.chain.plan.sequence)});
  add_chain_note(gc, st);
  return plan;
}

}  // namespace remat::rotor
