// instance.h — the MOCCASIN retention-interval model in integer units, free of Gecode types.
// moccasin.cc builds an Instance from a Graph (scaling sizes and costs into int32) and
// gecode_model.cc (the only file that includes Gecode) solves it. Events are 1-based; retention
// ends are exclusive: copy i of node v holds output k over events [start, end_k).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

#include "remat/toolkit.h"

namespace remat::moccasin {

struct Output {
  int32_t size = 0;          // scaled, rounded up; 0: no memory task
  bool live_to_end = false;  // graph output: the last active copy ends at horizon + 1
};

struct Use {
  int32_t producer = 0;  // position in the order
  int32_t output = 0;    // index into the producer's outputs
};

struct NodeModel {
  int32_t copies = 2;  // C_v, counting the first computation
  int32_t weight = 0;  // scaled cost of one computation
  int32_t temp = 0;    // scaled temp memory, held during the compute event only
  std::vector<Output> outputs;
  std::vector<Use> uses;  // distinct (producer, output) pairs read
};

struct Instance {
  std::vector<NodeModel> nodes;  // in the fixed input order
  int32_t capacity = 0;          // scaled budget minus graph inputs, rounded down
  bool staged = true;            // false: order=free, all-different starts on 1..sum C_v
};

// The work limit's unit (SolveOptions::work_limit) for the search: Gecode's propagator runs,
// this many a unit on models of at most kReferenceTasks memory tasks, about a second on the
// reference model (docs/limits.md; bench/work_unit_bench.cc measures it). A run of the
// cumulative, and each search node's copy of the space, grow with the model, so on a larger model
// a propagator run counts (tasks / kReferenceTasks)^1.15 runs: a unit then costs about the same
// CPU on 100 and 1,000 nodes (the exponent fits work_unit_bench's MOCCASIN sizes).
inline constexpr double kPropagationsPerUnit = 1e6;
inline constexpr double kReferenceTasks = 200;

// The cumulative's tasks: one per copy of each output and temp of nonzero size.
inline int64_t memory_tasks(const Instance& inst) {
  int64_t tasks = 0;
  for (const NodeModel& node : inst.nodes) {
    int64_t per_copy = node.temp > 0 ? 1 : 0;
    for (const Output& output : node.outputs) per_copy += output.size > 0 ? 1 : 0;
    tasks += per_copy * node.copies;
  }
  return tasks;
}

// Gecode's propagator runs per work unit on `inst` (see kPropagationsPerUnit).
inline double propagations_per_unit(const Instance& inst) {
  const double scale = static_cast<double>(memory_tasks(inst)) / kReferenceTasks;
  return kPropagationsPerUnit / std::pow(std::max(1.0, scale), 1.15);
}

struct SearchParams {
  // The phase's work (units) and the clock of the whole solve (it also expires on an interrupt).
  double work_limit = 60;
  const Deadline* deadline = nullptr;
  int threads = 1;
  uint64_t seed = 1;
  bool afc_branching = false;   // alternative: ends and starts by accumulated failure count
  double lns_fraction = 0.1;    // share of the order relaxed by one LNS restart
  bool scattered_lns = true;    // relax random nodes (true) or a window of consecutive ones
  double proof_fraction = 0.3;  // share of a phase's time given to the complete search first
};

struct CopyValue {
  bool active = false;
  int32_t start = 0;
};

struct Solution {
  std::vector<std::vector<CopyValue>> copies;  // [node][copy]
  int64_t objective = 0;                       // phase 1: max(M_var, M); phase 2: cost
  int64_t peak = -1;                           // the model's peak in units; -1: not known
  // The branched variables' values, to guide the next phase's search (same variable layout).
  std::vector<int> hint_active, hint_starts, hint_ends;
};

struct PhaseResult {
  bool found = false;
  bool proved = false;  // the search space of the phase was exhausted
  Solution best;
  int64_t solutions = 0;
  int64_t failures = 0;
  int64_t nodes = 0;
  int64_t restarts = 0;
  int64_t propagations = 0;  // the phase's work, in Gecode's propagator runs
  bool work_limit_hit = false, time_limit_hit = false;  // what ended the search, if not a proof
  bool start_used = false;                              // the start was the first incumbent
  std::chrono::steady_clock::time_point best_found;     // when `best` was found
};

// Each phase starts from `start` when given (a solution of this instance, with its hint arrays):
// it becomes the incumbent when it satisfies the phase's constraints (counter `start_used`),
// and guides the value selection either way.
// Phase 1: minimise max(M_var, capacity); without a start, from the no-recomputation plan.
PhaseResult solve_phase1(const Instance& instance, const Solution* start,
                         const SearchParams& params);
// Phase 2: minimise cost at the capacity.
PhaseResult solve_phase2(const Instance& instance, const Solution* start,
                         const SearchParams& params);

// How much of Gecode's integer range the instance needs, as a share: above 1 Gecode refuses the
// model (OutOfLimits). The checks it mirrors: every start plus length is an Int, and the
// cumulative's capacity times the width of its tasks' start domains times their number fits in
// 64 bits. Coarser size units lower it (moccasin.cc); the event horizon does not.
double gecode_range_use(const Instance& instance);

// Last event: staged n(n+1)/2 (the first computation of the last node), free Σ C_v.
inline int32_t horizon(const Instance& instance) {
  const auto n = static_cast<int32_t>(instance.nodes.size());
  if (instance.staged) return n * (n + 1) / 2;
  int32_t total = 0;
  for (const NodeModel& node : instance.nodes) total += node.copies;
  return total;
}

// Event of copy 1 of the node at 0-based position p in staged mode: (p+1)(p+2)/2.
inline int32_t first_event(int32_t position) { return (position + 1) * (position + 2) / 2; }
// Staged event of the node at position p in stage `stage` (1-based, stage > p).
inline int32_t staged_event(int32_t stage, int32_t position) {
  return stage * (stage - 1) / 2 + position + 1;
}
// Where an absent copy (>= 2) of the node at position p is pinned: its latest possible start.
inline int32_t absent_start(const Instance& instance, int32_t position) {
  const auto n = static_cast<int32_t>(instance.nodes.size());
  return instance.staged ? staged_event(n, position) : horizon(instance);
}

}  // namespace remat::moccasin
