// two_pass.h — plans that make some graph outputs in a second pass (a step of `auto`).
// A weight gradient is a graph output: once made, it stays resident to the end of the step. In a
// training graph the backward makes the last layers' gradients first, so on a network whose first
// layers have the largest activations (ResNet-18 at batch 32, 128 px) they fill the memory the
// first layers' backward needs: at 50 % of its peak layers 2-4's weight gradients are resident at
// the stem's batch-norm backward, where little else fits, and no one-pass plan fits. Deferring
// them to a second pass does: the first pass is the graph without them, solved at the budget by
// any solver; the second pass recomputes, in the default order, what they need that the first
// pass no longer holds (a forward and part of the backward again), then makes them. Where the
// budget leaves room above the first pass's floor, the first pass keeps some of what the second
// needs to its end (values held are cheaper than their recomputation: a minimum cut).
//   std::optional<DeferredOutputs> d = defer_outputs(graph, budget_bytes);
//   SolveResult first = solve(d->first_pass, "fastsa", options);
//   Sequence plan = two_pass_sequence(graph, *d, first.plan.sequence);  // simulate() judges it
// The deferred outputs are a prefix of the order the default schedule makes them in; its length
// and the kept values are chosen by the second pass's estimated cost. A second pass recomputes
// much, so it is worth running only where no one-pass plan fits.
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
  std::vector<ValueId> kept;     // graph values the first pass leaves resident for the second
  // The graph without the deferred nodes (and the values they make), `kept` made graph outputs.
  Graph first_pass;
  // first_pass with its dear nodes run once only (pin_dear_nodes): the same nodes and values in
  // the same order, so a plan of it is a plan of first_pass.
  Graph first_pass_pinned;
  std::vector<NodeId> original;  // first_pass node -> graph node
  int64_t first_pass_floor = 0;  // the floor estimate with `deferred` skipped and `kept` resident
  double second_pass_rerun_cost = 0;  // what the second pass runs besides the deferred nodes
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

// The deferrable outputs to make in a second pass, taken in the default order, and the values
// the first pass keeps for it. Each prefix from the fewest that bring the estimated first-pass
// floor within `budget_bytes` to all of them (a dozen evenly spaced at most) gets the values
// whose keeping spares the second pass the most cost while the floor estimate (kept values
// resident from when they are made) and the second pass's peak in the default order stay within
// the budget: a minimum cut between re-running nodes (their cost) and holding values (their
// bytes at a price), bisected on the price. The prefix whose second pass re-runs the least wins.
// When none fits both, the fewest deferrals keeping only what no node can make again. nullopt
// when no deferral is needed (the estimate with none is within budget) or none suffices (not even
// deferring all of them).
std::optional<DeferredOutputs> defer_outputs(const Graph& graph, int64_t budget_bytes);

// `g` with every required node whose run costs more per byte it makes than the graph does on
// average (its nodes' total cost over its values' total bytes) made non-recomputable. A first
// pass's plans fall into a few cost levels, by which dear nodes run twice (ResNet-18 at 50 %: its
// layers' convolutions), and an annealing run rarely leaves the level it settles in; without
// those reruns to choose from it settles in the cheapest levels (the stem's convolution, large
// for its cost, still runs again) or finds nothing within budget.
Graph pin_dear_nodes(const Graph& g);

// `first_pass_plan` (a sequence of d.first_pass) in graph ids, followed by the second pass: the
// deferred nodes and every node they need whose value the first pass does not leave resident
// (graph outputs, inputs and d.kept stay; a non-recomputable node's value is kept from its one
// run instead), each once, in the default order.
Sequence two_pass_sequence(const Graph& graph, const DeferredOutputs& d,
                           std::span<const NodeId> first_pass_plan);

// `plan` (two_pass_sequence's) without the second-pass runs the plan does not need to stay within
// `budget_bytes`: each step from `second_pass_start` on (the 64 dearest), the dearest first, is
// dropped where the simulator still finds the plan valid and within the budget (its readers then
// read what the first pass left, held across the boundary), such as a stem convolution whose
// output the first pass's last steps read. FastSA's run from the two passes finds such drops too,
// but not on every seed.
Sequence drop_second_pass_reruns(const Graph& graph, Sequence plan, size_t second_pass_start,
                                 int64_t budget_bytes);

}  // namespace remat::auto_solver
