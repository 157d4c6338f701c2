// dp.h — Rotor's dynamic programs, shared by rotor (src/solvers/rotor) and rockmate's rk-Rotor.
//   persistent_dp  Algorithm 3 + 4 (Theorem 4.8): the optimal memory-persistent sequence, O(S L^3).
//                  Family kRevolve keeps only F_all right before B (the Griewank–Walther strategy
//                  for the AD model, made valid as in §5.4).
//   weak_dp        Algorithm 1 + 2 (Theorem 4.7): the optimal weakly persistent sequence with a
//                  floating activation, which Lemma 4.4 shows is optimal among all sequences.
//   persistent_dp_exact  the same in exact bytes, rows kept as Pareto fronts (bins=exact).
//   *_min_memory   the exact smallest budget (bytes, a^0 included) of the same family and a
//                  sequence that needs no more; used for infeasible budgets and as a fallback.
// DP values are in the chain's time unit; memory is in bins (Discretisation). Every sequence is
// judged again by simulate_chain(); the DP value is only used to choose.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>

#include "chain_arrays.h"
#include "dp_kernels.h"
#include "remat/chain.h"
#include "remat/solver.h"
#include "remat/toolkit.h"

namespace remat::rotor {

enum class PersistentFamily { kRotor, kRevolve };

// The DPs' work (SolveOptions::work_limit): entries relaxed (candidate evaluations), this many a
// unit, about a second of the persistent DP on the reference chain (docs/limits.md;
// bench/work_unit_bench.cc measures it).
inline constexpr double kRelaxedPerUnit = 4e8;

struct DpOutcome {
  std::optional<ChainSequence> ops;  // nullopt: nothing fits the binned budget (or a limit hit)
  std::vector<int32_t> options;      // persistent_dp: the stage option of each op (0 for Rotor)
  double makespan = kInfinity;       // the DP's optimum C(1, ..., L+1, M - ω_a^0)
  int64_t rows = 0;                  // DP rows (sub-problems) computed, S + 1 entries each
  int64_t relaxed = 0;               // entries relaxed (candidate evaluations), in all
  bool timed_out = false;
  bool work_limit_hit = false;  // `relaxed` reached DpControl::max_relaxed first
};

struct DpControl {
  const Deadline* deadline = nullptr;  // checked between rows
  // The work limit: the DP stops once it has relaxed this many entries (checked between rows, so
  // at the same point on any machine).
  int64_t max_relaxed = std::numeric_limits<int64_t>::max();
  std::function<void(const Progress&)> on_progress;  // may be empty
};

// Checked between rows: true when the DP must stop there (the deadline passed, or `relaxed` reached
// the work limit), with `outcome`'s relaxed count and the flag saying which set.
inline bool stop_between_rows(const DpControl& control, int64_t relaxed, DpOutcome& outcome) {
  if (control.deadline != nullptr && control.deadline->expired())
    outcome.timed_out = true;
  else if (relaxed >= control.max_relaxed)
    outcome.work_limit_hit = true;
  else
    return false;
  outcome.relaxed = relaxed;
  return true;
}

DpOutcome persistent_dp(const Discretisation& d, PersistentFamily family, const DpControl& control);
DpOutcome weak_dp(const Discretisation& d, const DpControl& control);
// persistent_dp in exact bytes (bins=exact): rows are step functions kept as their breakpoints.
DpOutcome persistent_dp_exact(const ChainArrays<int64_t>& c, int64_t budget_bytes,
                              PersistentFamily family, const DpControl& control);

struct MinMemory {
  int64_t bytes = 0;             // the family's smallest feasible budget per the DP's memory rules
  ChainSequence ops;             // a sequence whose peak is at most `bytes`
  std::vector<int32_t> options;  // persistent family: the stage option of each op
};
MinMemory persistent_min_memory(const ChainArrays<int64_t>& c, PersistentFamily family);
// O(L^5); nullopt when the control's deadline or work limit (candidate evaluations, counted in
// `relaxed` when given) ends it first.
std::optional<MinMemory> weak_min_memory(const ChainArrays<int64_t>& c,
                                         const DpControl& control = {}, int64_t* relaxed = nullptr);

// DP table entries (rows x (S + 1)) the weak DP would allocate, to refuse too large a run early.
int64_t weak_dp_entries(int n, int64_t budget_bins);

}  // namespace remat::rotor
