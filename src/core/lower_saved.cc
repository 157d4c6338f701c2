// Lowering a saved set to a sequence (docs/design.md §1, Partitions; lower.h). The simulator's
// liveness rule does the releasing: a value lives from a production to its last use before the
// next one, so "dropping" a recomputed value here only means the next need of it recomputes it.
#include <fmt/format.h>

#include <algorithm>

#include "remat/error.h"
#include "remat/lower.h"
#include "remat/simulate.h"

namespace remat {
namespace {

class Lowerer {
 public:
  Lowerer(const Graph& graph, const ForwardPart& a, std::span<const ValueId> saved,
          SavedLowering lowering, int64_t max_steps, const Deadline* deadline)
      : graph_(graph), a_(a), lowering_(lowering), max_steps_(max_steps), deadline_(deadline) {
    const auto num_values = static_cast<size_t>(graph.num_values());
    saved_.assign(num_values, 0);
    for (ValueId v : saved) {
      REMAT_CHECK(a.in_forward[v],
                  fmt::format("lowering: saved {} is not in V_f", graph.describe(v)));
      saved_[v] = 1;
    }
    available_.assign(num_values, 0);
    direct_uses_left_.assign(num_values, 0);
    read_by_step_.assign(num_values, -1);
  }

  LoweredSaved run() {
    emit_forward();
    emit_backward();
    return finish();
  }

 private:
  // A V_f value the backward may only get by recomputing it.
  bool recomputable_value(ValueId v) const {
    return a_.in_forward[v] && !saved_[v] && !graph_.is_graph_input(v) &&
           !graph_.value(v).is_output;
  }

  // Forward part: V_f nodes needed for the saved values, the V_f outputs and the non-recomputable
  // V_f nodes, in graph order.
  void emit_forward() {
    IdVector<NodeId, uint8_t> needed(static_cast<size_t>(graph_.num_nodes()), 0);
    for (int32_t i = 0; i < graph_.num_nodes(); ++i) {
      const NodeId n{i};
      if (!a_.node_in_forward[n]) continue;
      bool need = !graph_.node(n).recomputable;
      for (ValueId y : graph_.node(n).outputs)
        need = need || saved_[y] || graph_.value(y).is_output;
      needed[n] = need;
    }
    for (int32_t i = graph_.num_nodes() - 1; i >= 0; --i) {
      if (!needed[NodeId{i}]) continue;
      for (ValueId v : graph_.node(NodeId{i}).inputs)
        if (!graph_.is_graph_input(v)) needed[graph_.producer(v)] = 1;
    }
    for (int32_t i = 0; i < graph_.num_nodes(); ++i)
      if (needed[NodeId{i}]) sequence_.push_back(NodeId{i});
    for (ValueId v : graph_.graph_inputs()) available_[v] = 1;
    for (int32_t i = 0; i < graph_.num_values(); ++i) {
      const ValueId v{i};
      if (a_.in_forward[v] && !recomputable_value(v)) available_[v] = 1;  // saved, input or output
    }
  }

  void emit_backward() {
    const std::vector<bool> required = required_nodes(graph_);
    std::vector<NodeId> backward;
    for (int32_t i = 0; i < graph_.num_nodes(); ++i)
      if (!a_.node_in_forward[NodeId{i}] && required[static_cast<size_t>(i)])
        backward.push_back(NodeId{i});
    for (NodeId n : backward)
      for (ValueId v : graph_.node(n).inputs)
        if (recomputable_value(v)) ++direct_uses_left_[v];
    for (int32_t step = 0; step < static_cast<int32_t>(backward.size()); ++step) {
      emit_backward_node(backward[static_cast<size_t>(step)], step);
      if (out_of_budget()) return;
    }
  }

  bool out_of_budget() {
    if (static_cast<int64_t>(sequence_.size()) > max_steps_) complete_ = false;
    if (deadline_ != nullptr && (step_checks_++ & 255) == 0 && deadline_->expired())
      complete_ = false;
    return !complete_;
  }

  void emit_backward_node(NodeId n, int32_t step) {
    transient_.clear();
    for (ValueId v : graph_.node(n).inputs) {
      if (!available_[v]) produce(v);
      read_by_step_[v] = step;
    }
    sequence_.push_back(n);
    for (ValueId y : graph_.node(n).outputs) available_[y] = 1;
    // A directly read value is held until its last direct read; a value recomputed only on the
    // way to one is dropped at once under kRelease.
    if (lowering_ == SavedLowering::kKeep) return;
    for (ValueId v : graph_.node(n).inputs)
      if (recomputable_value(v) && --direct_uses_left_[v] == 0) available_[v] = 0;
    for (ValueId v : transient_)
      if (read_by_step_[v] != step) available_[v] = 0;
  }

  // Recomputes v and its unavailable ancestors, depth first in input order.
  void produce(ValueId v) {
    push_producer(v);
    while (!stack_.empty()) {
      const NodeId p = stack_.back().first;
      const std::vector<ValueId>& inputs = graph_.node(p).inputs;
      const size_t next = stack_.back().second;
      if (next < inputs.size()) {
        ++stack_.back().second;
        if (!available_[inputs[next]]) push_producer(inputs[next]);
        continue;
      }
      stack_.pop_back();
      sequence_.push_back(p);
      for (ValueId y : graph_.node(p).outputs) {
        if (!available_[y]) transient_.push_back(y);
        available_[y] = 1;
      }
    }
  }

  void push_producer(ValueId v) {
    REMAT_CHECK(recomputable_value(v),
                fmt::format("lowering: the backward needs {}, which is neither saved nor "
                            "recomputable from saved values (invalid cut)",
                            graph_.describe(v)));
    const NodeId p = graph_.producer(v);
    REMAT_CHECK(!a_.no_recompute[p] && graph_.node(p).recomputable,
                fmt::format("lowering: would recompute banned {}", graph_.describe(p)));
    stack_.emplace_back(p, 0);
  }

  LoweredSaved finish() {
    LoweredSaved out;
    IdVector<NodeId, int32_t> runs(static_cast<size_t>(graph_.num_nodes()), 0);
    for (NodeId n : sequence_) ++runs[n];
    for (int32_t i = 0; i < graph_.num_nodes(); ++i) {
      if (runs[NodeId{i}] > 1) out.recomputed.push_back(NodeId{i});
      out.extra_runs += std::max(0, runs[NodeId{i}] - 1);
    }
    out.sequence = std::move(sequence_);
    out.complete = complete_;
    return out;
  }

  const Graph& graph_;
  const ForwardPart& a_;
  const SavedLowering lowering_;
  const int64_t max_steps_;
  const Deadline* deadline_;
  bool complete_ = true;
  uint32_t step_checks_ = 0;
  IdVector<ValueId, uint8_t> saved_;
  IdVector<ValueId, uint8_t> available_;
  IdVector<ValueId, int32_t> direct_uses_left_;
  IdVector<ValueId, int32_t> read_by_step_;  // the last backward step that read the value
  std::vector<ValueId> transient_;           // produced while preparing the current step
  std::vector<std::pair<NodeId, size_t>> stack_;
  Sequence sequence_;
};

}  // namespace

LoweredSaved lower_saved_set(const Graph& graph, const ForwardPart& forward,
                             std::span<const ValueId> saved, SavedLowering lowering,
                             int64_t max_steps, const Deadline* deadline) {
  return Lowerer(graph, forward, saved, lowering, max_steps, deadline).run();
}

}  // namespace remat
