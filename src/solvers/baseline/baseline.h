// baseline.h — the `none` solver: the default schedule (every node once, in graph order), no
// recomputation. It is the reference every CI% and "peak % of baseline" is measured against, and
// a start point any solver may call.
#pragma once

#include <memory>

#include "remat/solver.h"

namespace remat::baseline_solver {

std::unique_ptr<Solver> make(const SolverDirectory& others);

}  // namespace remat::baseline_solver
