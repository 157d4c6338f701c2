// evictor.h — one run of Dynamic Tensor Rematerialization over the default schedule (dtr.h says
// what the solver does with it). It replays the nodes in order, keeping a resident set of values
// and its bytes; before a step that would take the resident bytes above the budget it evicts the
// unpinned resident value of lowest score, and when a step reads an evicted value it runs that
// value's producer again first (recursively, its evicted inputs first: an explicit stack, no
// recursion). The bytes it keeps are an upper bound on the simulator's at every step (a value the
// simulator holds at a step is resident here), so a run that never went over the budget gives a
// plan the simulator finds within it; the simulator still judges every plan.
// Flat arrays sized once per graph; a run allocates nothing per step once its stack has grown.
//   Evictor evictor(graph);
//   EvictionRun run = evictor.run({.budget = b, .ops_limit = ops}, deadline);
#pragma once

#include <cstdint>
#include <vector>

#include "remat/graph.h"
#include "remat/plan.h"
#include "remat/toolkit.h"

namespace remat::dtr {

// The operations of running `node` once (a replay's step, or the simulator's): the step with its
// reads and writes.
inline int64_t step_ops(const Node& node) {
  return 1 + static_cast<int64_t>(node.inputs.size() + node.outputs.size());
}

struct RunSettings {
  int64_t budget = 0;     // bytes the resident set may take at a step (graph inputs included)
  int64_t ops_limit = 0;  // past it the run stops evicting and finishes (EvictionRun::cut_short)
  // Past this many recomputed steps it stops evicting too: a replay that recomputes the graph
  // over and over (where each recomputation evicts what the next one needs) gives no plan worth
  // the memory its sequence takes.
  int64_t max_recomputed_steps = 0;
  // The score counts the cost of the evicted values a recomputation of the value needs (h_DTR's
  // evicted neighbourhood); false: its producer's cost only.
  bool neighbours = true;
  // Values of non-recomputable nodes stay resident until no value made from them can be needed
  // again (the first run frees them after their last read, and gives up if a recomputation needs
  // one: EvictionRun::needs_freed_value).
  bool hold_unrecomputable = false;
};

struct EvictionRun {
  Sequence sequence;
  bool within_budget = true;       // no step's bytes went over the budget
  bool cut_short = false;          // the ops limit or the clock stopped the evictions
  bool thrashed = false;           // max_recomputed_steps stopped them
  bool needs_freed_value = false;  // a recomputation needed a freed non-recomputable value
  int64_t peak_bytes = 0;          // the run's own bookkeeping (the simulator's may be lower)
  int64_t evictions = 0;
  int64_t recomputed_steps = 0;
  int64_t ops = 0;
};

class Evictor {
 public:
  explicit Evictor(const Graph& graph);
  // The operations of one pass over the default schedule: a run keeps two in reserve to finish
  // without evicting once its ops limit is reached.
  int64_t pass_ops() const { return pass_ops_; }
  EvictionRun run(const RunSettings& settings, const Deadline& deadline);

 private:
  struct Frame {
    int32_t node = 0;
    int32_t next_input = 0;
    int32_t slot_begin = 0;  // its inputs' pinned flags: slot_pinned_[slot_begin ...]
    int32_t want = -1;       // the value a recomputation makes for the frame below; -1: main
    int32_t made = -1;       // the input the frame above it is making
  };

  void reset(const RunSettings& settings);
  void check_limits();
  bool execute(int32_t node);
  void push_frame(int32_t node, int32_t want);
  void run_step(const Frame& frame);
  void settle(int32_t v, int32_t want);
  void make_room(int64_t need);
  int32_t pick_victim();
  void drop(int32_t v);  // evicts or frees v
  double score(int32_t v, bool exact);
  double closure_cost(int32_t v);
  int32_t remaining_reads(int32_t v) const;
  bool held(int32_t v) const;
  void free_released_holds();

  // The indexed min-heap of evictable values, by their stored score (never above the current
  // one, except where a neighbour made again lowered it: pick_victim refreshes the top).
  void heap_push(int32_t v, double key);
  void heap_remove(int32_t v);
  void heap_set_key(int32_t v, double key);
  void sift_up(int32_t i);
  void sift_down(int32_t i);
  void heap_place(int32_t i, int32_t v);

  const Graph& g_;
  RunSettings settings_;
  // Per value, fixed.
  std::vector<int64_t> size_;
  std::vector<int32_t> producer_;    // -1: a graph input
  std::vector<char> evictable_;      // recomputable producer, not a graph output, some bytes
  std::vector<int32_t> hold_until_;  // the last step a value of a non-recomputable node may serve
  std::vector<std::pair<int32_t, int32_t>> holds_;  // (hold_until, value), by step
  int64_t pass_ops_ = 0;
  int64_t input_bytes_ = 0;
  // Per value, per run.
  std::vector<char> resident_;
  std::vector<int32_t> pins_;
  std::vector<int32_t> read_cursor_;  // users(v)[read_cursor_] is its next read by the schedule
  std::vector<int32_t> heap_pos_;
  std::vector<int32_t> touched_;  // 1 + the schedule step whose recomputations last read it
  std::vector<double> key_;
  std::vector<int32_t> heap_;
  std::vector<Frame> frames_;
  std::vector<char> slot_pinned_;
  std::vector<uint32_t> node_stamp_;  // closure_cost's visited nodes: those stamped epoch_
  std::vector<int32_t> closure_stack_;
  uint32_t epoch_ = 0;
  size_t next_hold_ = 0;
  int32_t now_ = 0;  // the schedule's step being made
  int64_t resident_bytes_ = 0;
  bool evicting_ = true;
  int64_t evict_ops_ = 0;
  const Deadline* deadline_ = nullptr;
  EvictionRun out_;
};

}  // namespace remat::dtr
