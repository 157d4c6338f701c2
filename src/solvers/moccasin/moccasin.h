// moccasin.h — the `moccasin` solver: MOCCASIN's retention-interval constraint program
// (Bartan et al., ICML 2023) on Gecode, in the fixed input order with staged event domains
// (or order=free), two phases (min peak, then min cost) and LNS around the incumbent.
// Parameters and the model are described in docs/solvers/moccasin.md.
#pragma once

#include <memory>

#include "remat/solver.h"

namespace remat::moccasin {

std::unique_ptr<Solver> make();

}  // namespace remat::moccasin
