// graph_solvers.h — rotor, revolve and sequential on a graph (the registry's graph rows).
// Each extracts the graph's chain (remat/lower.h), runs its chain solver under the budget less
// the bytes the chain does not see (graph inputs, forward outputs), lowers the chain plan to a
// sequence and lets the graph simulator judge it. When the lowered peak is over the budget while
// the chain plan fits, the chain budget is cut by the excess and the solve repeated (at most 3
// times; counter `budget_retries`). A graph without chain structure is an InputError naming why.
//   SolveResult r = solve(graph, "rotor", options);   // options.params: bins, persistence,
//                                                     // max_stages
#pragma once

#include <memory>

#include "remat/solver.h"

namespace remat::rotor {

std::unique_ptr<Solver> make_rotor_on_graph();
std::unique_ptr<Solver> make_revolve_on_graph();
std::unique_ptr<Solver> make_sequential_on_graph();

}  // namespace remat::rotor
