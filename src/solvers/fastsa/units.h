// units.h — what the annealer places in its time slots: single nodes, or grouped nodes.
// A unit has a cost, node-intermediate memory (`temp`), the values it reads and writes (graph
// inputs left out: they are resident and never change the peak), and the graph nodes it runs, in
// order. Stage 2 of FastSA anneals one unit per node; stage 1 anneals the grouped nodes of
// Algorithm 1 (Appendix C.1), where a node whose outputs are no smaller than its inputs is fused
// into every node that reads it, so its outputs are always recomputed from its inputs.
//   UnitTable units = group_units(graph, {.max_group_size = 0});
//   Sequence nodes = units.expand(unit_order);
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "remat/graph.h"
#include "remat/plan.h"
#include "remat/toolkit.h"

namespace remat::fastsa {

struct UnitTable {
  // By value index (ValueId::value()).
  std::vector<int64_t> value_size;
  std::vector<uint8_t> value_is_output;
  int64_t resident_bytes = 0;  // graph inputs, live throughout

  // By unit index, CSR: the inputs of unit u are input_ids[input_begin[u] .. input_begin[u + 1]).
  std::vector<int32_t> input_begin{0}, input_ids;
  std::vector<int32_t> output_begin{0}, output_ids;
  std::vector<int32_t> member_begin{0};
  std::vector<NodeId> members;
  std::vector<double> cost;
  std::vector<int64_t> temp;
  std::vector<uint8_t> recomputable;
  // The units in the order of the (grouped) default schedule; a valid sequence.
  std::vector<int32_t> initial_order;

  int32_t num_units() const { return static_cast<int32_t>(cost.size()); }
  int32_t num_values() const { return static_cast<int32_t>(value_size.size()); }
  std::span<const int32_t> inputs(int32_t u) const {
    return {input_ids.data() + input_begin[static_cast<size_t>(u)],
            input_ids.data() + input_begin[static_cast<size_t>(u) + 1]};
  }
  std::span<const int32_t> outputs(int32_t u) const {
    return {output_ids.data() + output_begin[static_cast<size_t>(u)],
            output_ids.data() + output_begin[static_cast<size_t>(u) + 1]};
  }
  std::span<const NodeId> members_of(int32_t u) const {
    return {members.data() + member_begin[static_cast<size_t>(u)],
            members.data() + member_begin[static_cast<size_t>(u) + 1]};
  }
  // The graph nodes run by a sequence of units.
  Sequence expand(std::span<const int32_t> units) const;
};

// One unit per graph node; initial_order is the default schedule. nullopt when `deadline`
// (optional) expires first.
std::optional<UnitTable> node_units(const Graph& graph, const Deadline* deadline = nullptr);

struct GroupingParams {
  int32_t max_group_size = 0;  // most nodes in one group; 0: no limit
};
// Algorithm 1 over the default schedule (see the header comment and docs/solvers/fastsa.md);
// nullopt when `deadline` (optional) expires first.
std::optional<UnitTable> group_units(const Graph& graph, const GroupingParams& params,
                                     const Deadline* deadline = nullptr);

}  // namespace remat::fastsa
