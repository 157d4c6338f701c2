// rockmate.h — Rockmate (Zhao et al., ICML 2023) on joint training graphs: the public header.
// The graph is cut into blocks at its forward separators (rk-GB, src/shared/blocks); each class of
// identical blocks gets a set of options, ways to run its forward and backward with some values
// recomputed, from the fixed-order MILP over a grid of (M_peak, M_save) budgets (rk-Checkmate,
// options.h); rk-Rotor, Rotor's persistent DP with one F_all/B case per option, picks the option
// and checkpoints of every block; the plan lowers to one graph sequence that the simulator
// judges. Parameters and figures: docs/solvers/rockmate.md.
//   SolveResult r = solve(graph, "rockmate", options);  // via the registry (registry.h)
// rk-GB's blocks alone, for listing them: blocks/summary.h.
#pragma once

#include <memory>
#include <span>

#include "remat/solver.h"

namespace remat::rockmate {

std::unique_ptr<Solver> make_rockmate(const SolverDirectory& others);
std::span<const ParamInfo> params();

}  // namespace remat::rockmate
