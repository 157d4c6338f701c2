// The chain solvers: rotor (persistent / weak DP), revolve, sequential, store-all (rotor.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "chain_family.h"
#include "remat/error.h"
#include "rotor/rotor.h"
#include "rotor_dp/dp.h"

namespace remat::rotor {
namespace {

// Largest DP table (entries of 8 bytes) a run may allocate: 4 GiB.
constexpr int64_t kMaxDpEntries = int64_t{1} << 29;

// bins: a positive count, or "exact" (0: one byte per bin).
template <class P>
void set_bins(P& p, const std::string& text) {
  const BadParamValue bad{"a positive integer or 'exact'"};
  if (text == "exact") {
    p.bins = 0;
    return;
  }
  try {
    p.bins = parse_int_text(text);
  } catch (const BadParamValue&) {
    throw bad;
  }
  if (p.bins < 1) throw bad;
}

constexpr ParamInfo kBinsInfo = {"bins", "500", "bins",
                                 "memory bins S of §5.2 (sizes rounded up), or `exact`"};

// A DP over one family of sequences, with the exact least budget of that family as a fallback:
// the budget is checked against it first, and its sequence is kept when the binned DP (sizes
// rounded up) finds nothing within the budget or something slower.
struct DpFamily {
  std::string_view name;
  bool proves_infeasible;  // the family holds an optimal sequence for every budget (Lemma 4.4)
  // nullopt when a limit stopped it; `relaxed` gets its work (candidate evaluations).
  std::optional<MinMemory> (*min_memory)(const ChainArrays<int64_t>&, const DpControl&,
                                         int64_t* relaxed);
  DpOutcome (*run)(const Discretisation&, const DpControl&);
  int64_t (*entries)(int n, int64_t budget_bins);
  // bins=exact without a table over m (nullptr: exact uses run() with one-byte bins).
  DpOutcome (*exact)(const ChainArrays<int64_t>&, int64_t budget, const DpControl&);
};

ChainPlan solve_family(const DpFamily& family, int64_t bins, const Chain& chain,
                       const SolveOptions& options) {
  const int64_t budget = options.budget.bytes;
  const ChainArrays<int64_t> bytes = chain_arrays(chain);
  const bool fronts = bins == 0 && family.exact != nullptr;
  std::optional<Discretisation> disc;
  if (!fronts) {
    disc = discretise(bytes, budget, bins);
    const int64_t entries = family.entries(bytes.n, disc->budget_bins);
    if (entries > kMaxDpEntries)
      throw InputError(
          fmt::format("{}: the DP table would hold {} entries ({} GiB) for L = {} and {} "
                      "bins; use fewer bins{}",
                      family.name, entries, entries * 8 >> 30, chain.length(), disc->budget_bins,
                      bins == 0 ? " than bins=exact" : ""));
  }
  const Deadline deadline(options.time_limit_s);
  DpControl control = {.deadline = &deadline,
                       .max_relaxed = work_ops(options.work_limit, kRelaxedPerUnit),
                       .on_progress = options.on_progress};
  ChainPlan plan;
  // Every stage once is the least makespan there is: when it fits, no DP can do better (the
  // binned DP rounds sizes up and may miss it at a budget right at the store-all peak).
  ChainSequence store_all = store_all_sequence(chain);
  if (simulate_chain(chain, store_all).peak_bytes <= budget) {
    plan.sequence = std::move(store_all);
    plan.stats.status = SolveStatus::kOptimal;
    plan.stats.add_counter("store_all", 1);
    return plan;
  }
  int64_t least_relaxed = 0;
  std::optional<MinMemory> least = family.min_memory(bytes, control, &least_relaxed);
  plan.stats.work = static_cast<double>(least_relaxed) / kRelaxedPerUnit;
  const bool least_timed_out = !least.has_value();
  if (least_timed_out) {
    plan.stats.stopped(deadline.expired() ? StopReason::kTimeLimit : StopReason::kWorkLimit);
    least = persistent_min_memory(bytes, PersistentFamily::kRotor);
  }
  const ChainEvaluation least_eval = simulate_chain(chain, least->ops);
  REMAT_CHECK(least_eval.valid && least_eval.peak_bytes <= least->bytes,
              fmt::format("{}: least-memory plan invalid or over its bound: {}", family.name,
                          least_eval.error));
  plan.stats.min_feasible_budget = least_eval.peak_bytes;
  plan.sequence = least->ops;
  if (budget < least_eval.peak_bytes) {
    plan.stats.status = family.proves_infeasible && !least_timed_out ? SolveStatus::kInfeasible
                                                                     : SolveStatus::kOverBudget;
    return plan;
  }
  if (least_timed_out) return plan;
  control.max_relaxed = std::max<int64_t>(1, control.max_relaxed - least_relaxed);
  const DpOutcome dp = fronts ? family.exact(bytes, budget, control) : family.run(*disc, control);
  plan.stats.work += static_cast<double>(dp.relaxed) / kRelaxedPerUnit;
  if (disc) {
    plan.stats.add_counter("bins", static_cast<double>(disc->budget_bins));
    plan.stats.add_counter("bin_bytes", static_cast<double>(disc->bin_bytes));
  }
  plan.stats.add_counter("dp_rows", static_cast<double>(dp.rows));
  plan.stats.add_counter("dp_relaxed_entries", static_cast<double>(dp.relaxed));
  plan.stats.add_counter("dp_makespan", dp.makespan);
  if (dp.timed_out) plan.stats.stopped(StopReason::kTimeLimit);
  if (dp.work_limit_hit) plan.stats.stopped(StopReason::kWorkLimit);
  plan.stats.status = SolveStatus::kFeasible;
  if (dp.ops && simulate_chain(chain, *dp.ops).cost <= least_eval.cost) {
    plan.sequence = *dp.ops;
    // Exact bins and the weak family: Theorem 4.7 with Lemma 4.4, optimal among all sequences.
    if (family.proves_infeasible && bins == 0) plan.stats.status = SolveStatus::kOptimal;
  }
  return plan;
}

// O(L^3): no need to stop it (nor to count it).
std::optional<MinMemory> persistent_least(const ChainArrays<int64_t>& c, const DpControl&,
                                          int64_t*) {
  return persistent_min_memory(c, PersistentFamily::kRotor);
}
std::optional<MinMemory> revolve_least(const ChainArrays<int64_t>& c, const DpControl&, int64_t*) {
  return persistent_min_memory(c, PersistentFamily::kRevolve);
}
DpOutcome persistent_run(const Discretisation& d, const DpControl& control) {
  return persistent_dp(d, PersistentFamily::kRotor, control);
}
DpOutcome revolve_run(const Discretisation& d, const DpControl& control) {
  return persistent_dp(d, PersistentFamily::kRevolve, control);
}
int64_t persistent_entries(int n, int64_t budget_bins) {
  return int64_t{n} * (n + 1) / 2 * (budget_bins + 1);
}
DpOutcome persistent_exact(const ChainArrays<int64_t>& c, int64_t budget,
                           const DpControl& control) {
  return persistent_dp_exact(c, budget, PersistentFamily::kRotor, control);
}
DpOutcome revolve_exact(const ChainArrays<int64_t>& c, int64_t budget, const DpControl& control) {
  return persistent_dp_exact(c, budget, PersistentFamily::kRevolve, control);
}

constexpr DpFamily kPersistent = {
    "rotor", false, persistent_least, persistent_run, persistent_entries, persistent_exact};
constexpr DpFamily kWeak = {"rotor", true, weak_min_memory, weak_dp, weak_dp_entries, nullptr};
constexpr DpFamily kRevolve = {"revolve",          false,        revolve_least, revolve_run,
                               persistent_entries, revolve_exact};

struct RotorParams {
  bool weak = false;   // persistence=weak: Algorithm 1 (Theorem 4.7); strong: Algorithm 3
  int64_t bins = 500;  // S of §5.2; 0 for bins=exact
};

const ParamTable<RotorParams> kRotorParams(
    "rotor", {
                 {{"persistence", "`strong`", "",
                   "`strong`: Algorithm 3/4 (memory-persistent); `weak`: Algorithm 1/2 "
                   "(weakly persistent, optimal among all sequences)"},
                  choice(&RotorParams::weak, {{"strong", false}, {"weak", true}})},
                 {kBinsInfo, set_bins<RotorParams>},
             });

struct RevolveParams {
  int64_t bins = 500;
};
const ParamTable<RevolveParams> kRevolveParams("revolve", {{kBinsInfo, set_bins<RevolveParams>}});

struct NoParams {};
const ParamTable<NoParams> kStoreAllParams("store-all", {});

struct SequentialParams {
  int64_t segments = 0;  // 0: the fastest k in 2..2√L within the budget
};
const ParamTable<SequentialParams> kSequentialParams(
    "sequential", {
                      {{"segments", "0", "segments",
                        "k; 0: the fastest k in 2..⌊2√L⌋ within the budget (the paper's "
                        "experiments)"},
                       integer(&SequentialParams::segments, 0)},
                  });

class RotorSolver : public ChainFamilySolver {
 public:
  RotorSolver() : ChainFamilySolver("rotor", rotor_params()) {}
  ChainPlan solve_chain(const Chain& chain, const SolveOptions& options) override {
    const RotorParams p = kRotorParams.parse(options.params);
    return solve_family(p.weak ? kWeak : kPersistent, p.bins, chain, options);
  }
};

class RevolveSolver : public ChainFamilySolver {
 public:
  RevolveSolver() : ChainFamilySolver("revolve", revolve_params()) {}
  ChainPlan solve_chain(const Chain& chain, const SolveOptions& options) override {
    return solve_family(kRevolve, kRevolveParams.parse(options.params).bins, chain, options);
  }
};

class StoreAllSolver : public Solver {
 public:
  ChainPlan solve_chain(const Chain& chain, const SolveOptions& options) override {
    kStoreAllParams.parse(options.params);  // none: any key is unknown
    ChainPlan plan;
    plan.sequence = store_all_sequence(chain);
    plan.stats.min_feasible_budget = simulate_chain(chain, plan.sequence).peak_bytes;
    return plan;
  }
};

// PyTorch's checkpoint_sequential(functions, k): k - 1 segments of floor(L / k) stages run
// without saving (F_ck on the first stage, F_∅ on the others), the last segment and the loss run
// saving all; backward recomputes each earlier segment with F_all right before its B steps.
ChainSequence sequential_sequence(int length, int segments) {
  const int size = length / segments;
  const int last_begin = size * (segments - 1) + 1;
  ChainSequence ops;
  for (int begin = 1; begin < last_begin; begin += size) {
    ops.push_back({ChainOpKind::kForwardCheckpoint, begin});
    for (int j = begin + 1; j < begin + size; ++j) ops.push_back({ChainOpKind::kForwardNoSave, j});
  }
  for (int j = last_begin; j <= length + 1; ++j) ops.push_back({ChainOpKind::kForwardAll, j});
  for (int j = length + 1; j >= last_begin; --j) ops.push_back({ChainOpKind::kBackward, j});
  for (int begin = last_begin - size; begin >= 1; begin -= size) {
    for (int j = begin; j < begin + size; ++j) ops.push_back({ChainOpKind::kForwardAll, j});
    for (int j = begin + size - 1; j >= begin; --j) ops.push_back({ChainOpKind::kBackward, j});
  }
  return ops;
}

class SequentialSolver : public ChainFamilySolver {
 public:
  SequentialSolver() : ChainFamilySolver("sequential", sequential_params()) {}
  ChainPlan solve_chain(const Chain& chain, const SolveOptions& options) override {
    const int length = chain.length();
    const int64_t fixed = kSequentialParams.parse(options.params).segments;
    if (fixed < 0 || fixed > length)
      throw InputError(
          fmt::format("sequential: invalid value '{}' for parameter 'segments' "
                      "(expected 1..{}, the chain length, or 0 for the best of "
                      "2..2√L)",
                      fixed, length));
    // The paper's experiments: every k from 2 to 2√L, keep the fastest within the budget.
    const int lo = fixed > 0 ? static_cast<int>(fixed) : std::min(2, length);
    const int hi =
        fixed > 0 ? static_cast<int>(fixed)
                  : std::clamp(static_cast<int>(std::floor(2 * std::sqrt(length))), lo, length);
    ChainPlan best;
    ChainEvaluation best_eval;
    int64_t least_peak = INT64_MAX;
    int64_t simulated = 0;  // its work: a few simulations, never cut short
    for (int k = lo; k <= hi; ++k) {
      ChainSequence ops = sequential_sequence(length, k);
      simulated += static_cast<int64_t>(ops.size());
      const ChainEvaluation e = simulate_chain(chain, ops);
      least_peak = std::min(least_peak, e.peak_bytes);
      const bool better = best.sequence.empty() ||
                          better_plan({e.peak_bytes, e.cost},
                                      {best_eval.peak_bytes, best_eval.cost}, options.budget.bytes);
      if (better) {
        best.sequence = std::move(ops);
        best.stats.counters = {{"segments", k}};
        best_eval = e;
      }
    }
    best.stats.min_feasible_budget = least_peak;  // over the segment counts tried
    best.stats.work = static_cast<double>(simulated) / kSimulatedStepsPerUnit;
    return best;
  }
};

}  // namespace

std::unique_ptr<Solver> make_rotor(const SolverDirectory&) {
  return std::make_unique<RotorSolver>();
}
std::unique_ptr<Solver> make_revolve(const SolverDirectory&) {
  return std::make_unique<RevolveSolver>();
}
std::unique_ptr<Solver> make_sequential(const SolverDirectory&) {
  return std::make_unique<SequentialSolver>();
}
std::unique_ptr<Solver> make_store_all(const SolverDirectory&) {
  return std::make_unique<StoreAllSolver>();
}

std::span<const ParamInfo> rotor_params() {
  static const std::vector<ParamInfo> rows = with_max_stages(kRotorParams.info());
  return rows;
}
std::span<const ParamInfo> revolve_params() {
  static const std::vector<ParamInfo> rows = with_max_stages(kRevolveParams.info());
  return rows;
}
std::span<const ParamInfo> sequential_params() {
  static const std::vector<ParamInfo> rows = with_max_stages(kSequentialParams.info());
  return rows;
}

}  // namespace remat::rotor
