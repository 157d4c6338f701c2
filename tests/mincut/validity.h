// validity.h — V_f and the validity of a saved set (min-cut paper §3.2), written for the tests
// apart from the solver's flow code: a plain closure over the graph in node order.
#pragma once

#include <vector>

#include "mincut/mincut.h"
#include "remat/graph.h"

namespace remat::testing {

// V_f by its definition: forward-phase nodes, and backward nodes with inputs, all in V_f; graph
// inputs read by a forward node.
struct ForwardSet {
  std::vector<bool> value, node;
};
ForwardSet forward_set(const Graph& g);

// Valid V_saved: a subset of V_f from which, with the gradient seeds, every node outside V_f can
// run, recomputing only V_f nodes that `a` does not ban.
bool valid_saved(const Graph& g, const ForwardSet& f, const mincut::JointAnalysis& a,
                 const std::vector<ValueId>& saved);

}  // namespace remat::testing
