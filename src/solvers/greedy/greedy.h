// greedy.h — the `greedy` solver: PyTorch's activation-memory-budget knapsack in remat's model.
// From the default schedule of a joint training graph, each round reruns in the backward the
// forward step that lowers the simulated peak most per unit of cost, just before the first
// backward step reading what it makes (after the forward steps it needs whose values the backward
// would not otherwise keep, `chain_depth` deep), until the peak fits the budget or no such
// recomputation lowers it. Cheap steps whose outputs are large go first. An annealing search may
// miss such a plan where it needs several steps moved at once (a matmul and the softmax reading
// it); FastSA started from the greedy plan goes on from there.
// Each round evaluates every candidate exactly (the simulator's figures) without replaying the
// schedule: recomputations.h indexes the schedule once per round and prices an insertion from
// the few values it touches. A non-recomputable node never runs twice. Work: steps indexed and
// values priced (docs/limits.md); same graph, budget and parameters → same plan.
//   SolveResult r = solve(graph, "greedy", options);
#pragma once

#include <memory>
#include <span>

#include "remat/solver.h"

namespace remat::greedy {

std::unique_ptr<Solver> make(const SolverDirectory& others);
std::span<const ParamInfo> params();

}  // namespace remat::greedy
