// simulate.h — the one judge of a plan.
// Replays a sequence under the simulator rule (docs/design.md §1) and reports validity, peak, cost
// and the memory timeline in O(T + total inputs) time. Solvers never report their own estimates;
// every printed figure comes from here. Also the bounds every solver can use and the baseline
// (default schedule).
//   Evaluation e = simulate(graph, plan.sequence);
//   if (!e.valid) std::cerr << e.error;  // "step 12: node 3 ('mul_3') reads value 7 ('x') ..."
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "remat/graph.h"
#include "remat/plan.h"

namespace remat {

struct Evaluation {
  bool valid = false;
  std::string error;        // empty when valid; names the offending step
  int32_t error_step = -1;  // 0-based step of the first violation, -1 if none or at the end
  int64_t peak_bytes = 0;
  int32_t peak_step = -1;  // first step reaching the peak
  double cost = 0;
  std::vector<int64_t> timeline;  // mem(t) for every step; empty unless asked for
};

struct SimulateOptions {
  bool timeline = false;
};

Evaluation simulate(const Graph& graph, std::span<const NodeId> sequence,
                    SimulateOptions options = {});

// The default schedule: every node once, in array order.
Sequence default_schedule(const Graph& graph);

// The nodes in the order `sequence` first runs them, when it runs every node and that order is
// not the default schedule's; nullopt otherwise. A fixed-order model (Checkmate's) built over
// this order holds the sequence's first computations as they are.
std::optional<Sequence> first_run_reordering(const Graph& graph, std::span<const NodeId> sequence);

// Nodes that every valid sequence must run at least once: ancestors of the graph outputs and
// non-recomputable nodes (with their ancestors).
std::vector<bool> required_nodes(const Graph& graph);

// No valid sequence has a lower peak: the largest footprint of a required node (its inputs,
// outputs, temp and all graph inputs) and the final footprint (graph inputs plus outputs).
int64_t memory_lower_bound(const Graph& graph);
// Each required node once.
double cost_lower_bound(const Graph& graph);

struct Baseline {
  int64_t peak_bytes = 0;
  double cost = 0;
};
// Simulator figures of the default schedule.
Baseline baseline(const Graph& graph);

// The three above, computed (Graph::build keeps them; graph.bounds() and the three read them).
GraphBounds compute_bounds(const Graph& graph);

}  // namespace remat
