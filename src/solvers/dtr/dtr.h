// dtr.h — the `dtr` solver: Dynamic Tensor Rematerialization (Kirisame et al., ICLR 2021) planned
// ahead of time, on any graph. It replays the default schedule with the budget as its memory:
// before a step that would go over it, it evicts the resident value of least
// h = c / (m × d) (c: the cost of making it again with the evicted values that needs — h_DTR's
// evicted neighbourhood; m: its bytes; d: the steps until the schedule needs it next, the
// paper's staleness made exact, since the whole schedule is known), and a step reading an evicted
// value runs its producer again first, recursively (evictor.h). The plan is that replay; the
// simulator judges it. When the simulator's peak leaves room under the budget (the replay keeps a
// value until it evicts it, the simulator only until its last read), further replays with a
// higher internal budget trade that room for fewer recomputations. When even evicting all it may
// does not fit, the plan is the lowest-peak replay, over budget.
// Work: steps replayed, heap moves and values scored (docs/limits.md); deterministic.
//   SolveResult r = solve(graph, "dtr", options);
#pragma once

#include <memory>
#include <span>

#include "remat/solver.h"

namespace remat::dtr {

std::unique_ptr<Solver> make(const SolverDirectory& others);
std::span<const ParamInfo> params();

}  // namespace remat::dtr
