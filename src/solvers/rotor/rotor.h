// rotor.h — Rotor's chain solvers (Herrmann et al., "Optimal checkpointing for heterogeneous
// chains") as registry rows, the one public header of src/solvers/rotor/.
//   rotor       the optimal persistent DP (Algorithm 3); persistence=weak: Algorithm 1
//   revolve     Griewank–Walther's schedule on the heterogeneous chain
//   sequential  PyTorch's checkpoint_sequential, best k segments
//   store-all   no recomputation (chains only)
// rotor, revolve and sequential take chains and graphs: on a graph they extract its chain
// (remat/lower.h), solve it under the budget less the bytes the chain does not see, lower the
// chain plan to a sequence and let the graph simulator judge it (docs/solvers/rotor.md).
//   ChainSolveResult r = solve(chain, "rotor", options);   // through the registry (solver.h)
#pragma once

#include <memory>

#include "remat/solver.h"

namespace remat::rotor {

std::unique_ptr<Solver> make_rotor();
std::unique_ptr<Solver> make_revolve();
std::unique_ptr<Solver> make_sequential();
std::unique_ptr<Solver> make_store_all();

}  // namespace remat::rotor
