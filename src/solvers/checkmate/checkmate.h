// checkmate.h — registry factories for Checkmate (Jain et al., MLSys 2020) over a fixed order:
// `checkmate`, the MILP solved by CBC from a repaired warm start, and `checkmate-lp`, the LP
// relaxation (Clp) rounded into plans. Parameters are documented in docs/solvers/checkmate.md.
#pragma once
#include <memory>
#include <span>

#include "remat/solver.h"

namespace remat::checkmate {

// `checkmate` warm-starts from fastsa's fixed-order annealing, run through `others`.
std::unique_ptr<Solver> make_milp(const SolverDirectory& others);
std::unique_ptr<Solver> make_lp(const SolverDirectory& others);
std::span<const ParamInfo> milp_params();
std::span<const ParamInfo> lp_params();

}  // namespace remat::checkmate
