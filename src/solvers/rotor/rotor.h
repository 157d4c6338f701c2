// rotor.h — Rotor's chain solvers (Herrmann et al., "Optimal checkpointing for heterogeneous
// chains") as registry rows, the one public header of src/solvers/rotor/.
//   rotor       the optimal persistent DP (Algorithm 3); persistence=weak: Algorithm 1
//   revolve     Griewank–Walther's schedule on the heterogeneous chain
//   sequential  PyTorch's checkpoint_sequential, best k segments
//   store-all   no recomputation (chains only)
// rotor, revolve and sequential take chains and graphs: on a graph they extract its chain
// (remat/lower.h), solve it under the budget less the bytes the chain does not see, lower the
// chain plan to a sequence and let the graph simulator judge it (docs/solvers/rotor.md).
//   ChainSolveResult r = solve(chain, "rotor", options);   // through the registry (registry.h)
#pragma once

#include <memory>

#include "remat/solver.h"

namespace remat::rotor {

std::unique_ptr<Solver> make_rotor(const SolverDirectory& others);
std::unique_ptr<Solver> make_revolve(const SolverDirectory& others);
std::unique_ptr<Solver> make_sequential(const SolverDirectory& others);
std::unique_ptr<Solver> make_store_all(const SolverDirectory& others);
// Each row's parameter table: its chain parameters, then `max_stages` (graphs only). store-all
// takes none.
std::span<const ParamInfo> rotor_params();
std::span<const ParamInfo> revolve_params();
std::span<const ParamInfo> sequential_params();

}  // namespace remat::rotor
