// moccasin.h — the `moccasin` solver: MOCCASIN's retention-interval constraint program
// (Bartan et al., ICML 2023) on Gecode, in the fixed input order with staged event domains
// (or order=free), two phases (min peak, then min cost) and LNS around the incumbent.
// Parameters and the model are described in docs/solvers/moccasin.md.
#pragma once

#include <memory>
#include <span>

#include "remat/solver.h"

namespace remat::moccasin {

// Its warm start runs other solvers through `others` (docs/solvers/moccasin.md, Warm start).
std::unique_ptr<Solver> make(const SolverDirectory& others);
std::span<const ParamInfo> params();

}  // namespace remat::moccasin
