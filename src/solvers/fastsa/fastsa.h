// fastsa.h — the `fastsa` solver: simulated annealing over node sequences (FastSA, NeurIPS 2023).
// Works on any DAG and may reorder as well as recompute. Stage 1 anneals grouped nodes
// (Algorithm 1) until the budget is met; stage 2 anneals single nodes at low temperature to
// remove redundant recomputation. With --threads N, N independent walks (annealing runs, each
// from its own seed derive_seed(seed, i)) run and the best plan (by the simulator; ties to the
// lower walk) is kept.
// Parameters and defaults: params.h and docs/solvers/fastsa.md. It does not do offloading
// (Appendix B.3) nor the dynamic segment tree of Appendix C.3.
//   SolveResult r = solve(graph, "fastsa", options);  // options.params["mode"] = "order", ...
#pragma once

#include <memory>

#include "remat/solver.h"

namespace remat::fastsa {

std::unique_ptr<Solver> make(const SolverDirectory& others);
// Its parameter table's rows (params.h).
std::span<const ParamInfo> params();

}  // namespace remat::fastsa
