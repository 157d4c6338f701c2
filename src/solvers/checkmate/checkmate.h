// checkmate.h — registry factories for Checkmate (Jain et al., MLSys 2020) over a fixed order:
// `checkmate`, the MILP solved by CBC from a repaired warm start, and `checkmate-lp`, the LP
// relaxation (Clp) rounded into plans. Parameters are documented in docs/solvers/checkmate.md.
#pragma once
#include <memory>

#include "remat/solver.h"

namespace remat::checkmate {

std::unique_ptr<Solver> make_milp();
std::unique_ptr<Solver> make_lp();

}  // namespace remat::checkmate
