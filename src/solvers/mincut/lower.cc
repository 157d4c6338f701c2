// lower_cut: the core's saved-set lowering (remat/lower.h) on a min-cut analysis.
#include "remat/lower.h"

#include "mincut/mincut.h"
#include "remat/error.h"

namespace remat::mincut {

Lowered lower_cut(const Graph& graph, const JointAnalysis& analysis, std::span<const ValueId> saved,
                  Lowering lowering, int64_t max_steps, const Deadline* deadline) {
  REMAT_CHECK(lowering != Lowering::kAuto, "mincut: lower_cut needs kRelease or kKeep");
  ForwardPart forward;
  forward.in_forward = analysis.in_vf;
  forward.node_in_forward = analysis.node_in_vf;
  forward.no_recompute.assign(static_cast<size_t>(graph.num_nodes()), 0);
  for (int32_t i = 0; i < graph.num_nodes(); ++i)
    forward.no_recompute[NodeId{i}] = analysis.banned(NodeId{i}) ? 1 : 0;
  LoweredSaved low =
      lower_saved_set(graph, forward, saved,
                      lowering == Lowering::kKeep ? SavedLowering::kKeep : SavedLowering::kRelease,
                      max_steps, deadline);
  return Lowered{.sequence = std::move(low.sequence),
                 .recomputed = std::move(low.recomputed),
                 .extra_runs = low.extra_runs,
                 .complete = low.complete};
}

}  // namespace remat::mincut
