// Chain solvers on graphs: extract, solve the chain, lower, judge (chain_family.h).
#include <fmt/format.h>

#include <algorithm>
#include <functional>

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

// The graph rows' max_stages, apart from the chain solver's own parameters (a key neither knows
// is an error).
struct SplitParams {
  ParamMap chain;
  int32_t max_stages = 0;
};

SplitParams split_params(std::string_view name, std::span<const ParamInfo> rows,
                         const ParamMap& params) {
  const ParamTable<ExtractParams> extract_table(
      name, {{kMaxStagesInfo, integer(&ExtractParams::max_stages, 2, 1 << 20)}});
  SplitParams out;
  out.chain = params;
  ParamMap extract_params;
  for (const auto& [key_text, text] : params) {
    const std::string_view key = key_text;  // a structured binding cannot be captured (clang 14)
    if (std::none_of(rows.begin(), rows.end(), [&](const ParamInfo& p) { return p.key == key; }))
      throw_unknown_param(name, key, rows);
    if (key == kMaxStagesInfo.key) extract_params[key_text] = text;
  }
  out.chain.erase(std::string(kMaxStagesInfo.key));
  out.max_stages = static_cast<int32_t>(extract_table.parse(extract_params).max_stages);
  return out;
}

// The chain solved at a chain budget and lowered to the graph.
using AttemptAt = std::function<Attempt(int64_t)>;

struct BudgetSearch {
  Attempt best;
  int retries = 0, searches = 0;
};

// At the budget less what stays resident; retried only when the chain plan fit but its lowering
// did not: the chain's accounting missed something the simulator sees, so ask the chain for that
// much less.
BudgetSearch lower_with_retries(const AttemptAt& attempt_at, int64_t budget, int64_t resident,
                                const Limits& limits) {
  BudgetSearch search;
  bool have = false;
  int64_t chain_budget = std::max<int64_t>(0, budget - resident);
  for (int attempt = 0; attempt <= kMaxBudgetRetries; ++attempt) {
    Attempt a = attempt_at(chain_budget);
    const int64_t peak = a.eval.peak_bytes;
    const bool chain_fits = a.chain.eval.peak_bytes <= chain_budget;
    if (!have || better(a, search.best, budget)) search.best = std::move(a), have = true;
    if (peak <= budget || !chain_fits || limits.stop()) break;
    chain_budget -= peak - budget;
    if (chain_budget < 0 || attempt == kMaxBudgetRetries) break;
    ++search.retries;
  }
  return search;
}

// The chain over-counts (ā^ℓ holds a^ℓ until B^ℓ, δ values crossing several boundaries, the
// gradients charged to every later stage), by at most its excess at store-all; a larger chain
// budget may still lower within the budget, and cheaper. Bisects above a plan that fits, keeping
// the best.
void bisect_chain_budget(const AttemptAt& attempt_at, const Graph& graph, const GraphChain& gc,
                         int64_t budget, const Limits& limits, BudgetSearch& search) {
  const int64_t excess = simulate_chain(gc.chain, store_all_sequence(gc.chain)).peak_bytes +
                         gc.resident_bytes - baseline(graph).peak_bytes;
  int64_t lo = search.best.chain_budget;
  int64_t hi = search.best.chain_budget + std::max<int64_t>(excess, 0);
  for (int i = 0; i < kBudgetSearchSteps && hi - lo > 1 && !limits.stop(); ++i) {
    const int64_t mid = lo + (hi - lo) / 2;
    Attempt a = attempt_at(mid);
    ++search.searches;
    const bool fits = a.eval.peak_bytes <= budget;
    if (better(a, search.best, budget)) search.best = std::move(a);
    (fits ? lo : hi) = mid;
  }
}

void record_chain_stats(SolveStats& st, const Graph& graph, const GraphChain& gc,
                        const BudgetSearch& search) {
  st.add_counter("stages", static_cast<double>(gc.chain.stages.size()));
  st.add_counter("separator_candidates", gc.separator_candidates);
  st.add_counter("resident_bytes", static_cast<double>(gc.resident_bytes));
  st.add_counter("fixed_cost", gc.fixed_cost);
  st.add_counter("chain_budget", static_cast<double>(search.best.chain_budget));
  st.add_counter("chain_peak", static_cast<double>(search.best.chain.eval.peak_bytes));
  st.add_counter("chain_makespan", search.best.chain.eval.cost);
  st.add_counter("budget_retries", search.retries);
  st.add_counter("budget_search_solves", search.searches);
  for (const auto& [key, value] : search.best.chain.plan.stats.counters)
    st.add_counter("chain." + key, value);
  std::vector<std::string> separators;
  for (NodeId n : gc.separators) separators.push_back(graph.node(n).name);
  st.lists.emplace_back("separators", std::move(separators));
  st.lists.emplace_back("chain_ops",
                        std::vector<std::string>{format_sequence(search.best.chain.plan.sequence)});
  add_chain_note(gc, st);
}

}  // namespace

std::vector<ParamInfo> with_max_stages(std::span<const ParamInfo> chain_rows) {
  std::vector<ParamInfo> rows(chain_rows.begin(), chain_rows.end());
  rows.push_back(kMaxStagesInfo);
  return rows;
}

Plan ChainFamilySolver::solve(const Graph& graph, const SolveOptions& options) {
  const std::string_view name = this->name();
  Limits limits(options.work_limit, options.time_limit_s);
  const SplitParams split = split_params(name, params(), options.params);
  const ParamMap& chain_params = split.chain;
  ChainExtractOptions extract;
  extract.max_stages = split.max_stages;
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

  BudgetSearch search = lower_with_retries(attempt_at, budget, gc.resident_bytes, limits);
  if (search.best.eval.peak_bytes <= budget)
    bisect_chain_budget(attempt_at, graph, gc, budget, limits, search);
  const Attempt& best = search.best;

  Plan plan;
  plan.stats.status = SolveStatus::kFeasible;  // the judged solve sets it from the simulator
  const Baseline base = baseline(graph);
  const bool fits = best.eval.peak_bytes <= budget;
  if (!fits && best.eval.peak_bytes >= base.peak_bytes) {
    plan.sequence = default_schedule(graph);  // never worse than the default schedule
    plan.stats.add_counter("used_default_schedule", 1);
  } else {
    plan.sequence = std::move(search.best.sequence);
  }
  SolveStats& st = plan.stats;
  st.stopped(best.chain.plan.stats.stop_reason);
  st.stopped(limits.reason());  // the budget search was cut short
  st.work = limits.spent();
  record_chain_stats(st, graph, gc, search);
  return plan;
}

}  // namespace remat::rotor
