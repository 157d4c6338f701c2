// params.h — the `fastsa` solver's parameters (--param KEY=VALUE), with the paper's defaults.
// Unknown keys and bad values throw InputError naming the key and listing the known ones.
//   FastsaParams p = parse_fastsa_params({{"stage1_iterations", "1000000"}});
#pragma once

#include <cstdint>
#include <string>

#include "anneal.h"
#include "remat/params.h"
#include "remat/solver.h"

namespace remat::fastsa {

enum class Mode {
  kRecompute,  // two stages, add / remove / rotate (§2.2)
  kOrder,      // memory-minimising topological order: rotations only, objective M (App. B.2)
  // Recomputation in the default order: adds and removes only, never of a node's first
  // computation, so the plan is in the class Checkmate and MOCCASIN optimise over.
  kFixedOrder,
};

struct FastsaParams {
  Mode mode = Mode::kRecompute;
  Objective objective = Objective::kStrict;  // "strict" (footnote 2) or "product" (equation 1)
  int64_t slots = 0;  // state length T, a power of two; 0: from the graph size (see slots_for)
  bool group_nodes = true;      // Algorithm 1 before stage 1
  int32_t max_group_size = 64;  // most nodes in one group (0: no limit); bounds the blow-up
  int64_t stage1_iterations = 20'000'000;  // App. D.4 (mode=order: the only stage)
  int64_t stage2_iterations = 2'000'000;   // App. D.4
  double iterations_scale = 1;           // multiplies both counts (parse_fastsa_params applies it)
  double initial_temperature_pct = 0.1;  // % of the initial objective (App. D.4)
  double final_temperature_pct = 0.01;   // % of each stage's initial temperature (App. D.4)
  bool stop_at_budget = true;
  // Groups that cannot reach the budget in half of stage 1 give way to single nodes for the
  // other half (fastsa.cc, run_first_stage).
  bool stage1_fallback = true;
  // After a memory pass, the single nodes run at most this many convergence windows (0: no cap;
  // fastsa.cc, run_first_stage, says why).
  int64_t stage1_fallback_windows = 2;
  // Before the single nodes, the groups anneal on for memory alone (fastsa.cc, run_memory_pass).
  bool stage1_memory_pass = true;
  // The share of the memory pass's proposals drawn around the peak slot (anneal.h peak_moves).
  double memory_pass_peak_moves = 0.3;
  // Stage 2 starts at the temperature where stage 1 stopped ("stop") or at its scheduled final
  // temperature ("final"); they differ when stage 1 stops early at the budget.
  bool stage2_from_stop = true;
  // Iterations stage 1 leaves unused when it stops at the budget go to stage 2, so a run is at
  // most stage1 + stage2 iterations (22 M by default, as in App. D.4) and the time saved by
  // meeting the budget early is spent on removing recomputation.
  bool carry_over_iterations = true;
  // Stage 2 never leaves the budget once within it (see StageSettings::keep_within_budget).
  bool stage2_keep_budget = true;
  // Rotation targets anywhere ("uniform", §2.2) or within the unit's valid range ("local":
  // more valid moves, but on the MOCCASIN graphs no better plans and several times slower).
  bool local_rotations = false;  // stage 1 stops once the budget is met (§3.1)
  bool logaddexp = false;        // objective on the log-add-exp peak (App. C.2)
  double logaddexp_peak = 10;    // the baseline peak in the scaled units (App. C.2)
  // Stopping. kConverge (default): a stage also ends once its best plan and best objective have
  // not improved for `convergence_window` iterations, so small graphs finish in a fraction of a
  // second; the temperature schedule is the same as kFixed. kFixed: the paper's iteration counts
  // (App. D.4) run to the end. Both stop by iterations, so the plan does not depend on machine
  // load; the time limit is only a safety net (stop_reason says when it fired).
  bool converge = true;
  int64_t convergence_window = 0;  // iterations; 0: window_for(units) (see there)
};

// The automatic convergence window: 4,000 iterations per unit within [100 k, 1 M] (a graph of a
// few nodes converges in a fraction of a second), or 500 per unit on larger graphs.
int64_t window_for(int64_t units);

// The parameter table (remat/params.h) and the parse through it (iterations_scale applied).
const ParamTable<FastsaParams>& fastsa_param_table();
FastsaParams parse_fastsa_params(const ParamMap& params);

// T for a state that starts with `units` occupied slots. App. D.4 fixes T = 2^20 (about 126
// slots per node on its largest graph); we scale it with the graph: 16 slots per unit, at least
// 2^12, at most 2^20, so the tree of a 1,000-node graph stays in cache (16 and 64 slots per unit
// gave the same Table 1 figures; 16 is faster on large graphs). `requested` (> 0)
// overrides, raised if needed to hold 4 x units.
int32_t slots_for(int64_t units, int64_t requested);

}  // namespace remat::fastsa
