// two_pass.h — plans that make some graph outputs in a second pass (a step of `auto`).
// A weight gradient is a graph output: once made, it stays resident to the end of the step. In a
// training graph the backward makes the last layers' gradients first, so on a network whose first
// layers have the largest activations (ResNet-18 at batch 32, 128 px) they fill the memory the
// first layers' backward needs: at 50 % of its peak only 1.8 MB is free at the stem's batch-norm
// backward, while layers 2-4's weight gradients are 44 MB, and no one-pass plan fits. Deferring
// them to a second pass does: the first pass is the graph without them, solved at the budget by
// any solver; the second pass recomputes, in the default order, what they need that the first
// pass no longer holds (a forward and part of the backward again), then makes them.
//   std::optional<DeferredOutputs> d = defer_outputs(graph, budget_bytes);
//   SolveResult first = solve(d->first_pass, "fastsa", options);
//   Sequence plan = two_pass_sequence(graph, *d, first.plan.sequence);  // simulate() judges it
// It does not choose the deferred set by cost: it takes the fewest outputs, in the order the
// default schedule makes them, that bring its estimate of the first pass's floor (below) within
// the budget, so it is worth running only where no one-pass plan fits.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "remat/graph.h"
#include "remat/plan.h"

namespace remat::auto_solver {

struct DeferredOutputs {
  std::vector<NodeId> deferred;  // graph nodes made in the second pass, in the default order
  Graph first_pass;              // the graph without them (and without the values they make)
  std::vector<NodeId> original;  // first_pass node -> graph node
  int64_t first_pass_floor = 0;  // estimate_first_pass_floor with `deferred`
};

// The nodes whose every output is a graph output read by no node but other such nodes (weight
// gradients, with the views and transposes of them that are outputs too), recomputable, in the
// default order.
std::vector<NodeId> deferrable_outputs(const Graph& graph);

// The first pass's peak if every node ran once in the default order with nothing kept beyond
// need: at each node not deferred, the graph inputs, its own inputs, outputs and temp, plus every
// graph output made before it (resident to the end). An estimate, not a bound: a plan may make an
// output later than the default order does.
int64_t estimate_first_pass_floor(const Graph& graph, std::span<const NodeId> deferred);

// The fewest deferrable outputs, taken in the default order, whose deferral brings the estimated
// first-pass floor within `budget_bytes`. nullopt when no deferral is needed (the estimate with
// none is within budget) or none suffices (not even deferring all of them).
std::optional<DeferredOutputs> defer_outputs(const Graph& graph, int64_t budget_bytes);

// `first_pass_plan` (a sequence of d.first_pass) in graph ids, followed by the second pass: the
// deferred nodes and every node they need whose value the first pass does not leave resident
// (graph outputs and inputs stay; a non-recomputable node's value is kept from its one run
// instead), each once, in the default order.
Sequence two_pass_sequence(const Graph& graph, const DeferredOutputs& d,
                           std::span<const NodeId> first_pass_plan);

}  // namespace remat::auto_solver
