// recomputations.h — the greedy solver's moves and their exact pricing.
// A move inserts a chain of forward steps (a recomputation and the steps it needs) just before
// the first backward step reading the recomputed step's outputs. InsertionPricer indexes a valid
// schedule once (each value's productions and reads, the simulator's memory at every step, a
// range-maximum table) and then gives the simulator's peak of the schedule with any chain inserted
// in time proportional to the values the chain touches (times a logarithm), not to the schedule's
// length: the copies the chain makes end the old copies' lives at their last earlier reads, the
// values it reads live on until it runs, and nothing after the insertion point changes.
//   const Moves moves = find_moves(graph, sequence, 4);
//   InsertionPricer pricer(graph);
//   pricer.index(sequence, simulate(graph, sequence, {.timeline = true}).timeline);
//   const Move& move = moves.moves[0];
//   const int32_t at = pricer.first_read_of(move.step, moves.backward_begin + 1);
//   std::optional<int64_t> peak = pricer.peak_with(move.chain, at);
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "remat/graph.h"
#include "remat/ids.h"
#include "remat/plan.h"

namespace remat::greedy {

// Recomputing `step` (a recomputable forward step whose outputs the backward reads): `chain` runs
// the forward steps it needs whose values the backward does not read (at most `chain_depth`
// deep, recomputable ones only), then `step` last; each step after the steps making its inputs.
struct Move {
  NodeId step;
  std::vector<NodeId> chain;
  double cost = 0;      // of the chain's steps
  int64_t touches = 0;  // the chain's input and output slots: what pricing it costs
};

struct Moves {
  // The position of the schedule's first backward step: every chain goes after it. It runs right
  // after the forward, so what only it reads is not kept for the backward, and rerunning a step
  // just before it would save nothing.
  int32_t backward_begin = 0;
  // In the order the schedule first runs their steps.
  std::vector<Move> moves;
};

// The moves of `sequence` (a valid schedule). The backward begins at the first step of a
// backward-phase node; a schedule without one has no moves.
Moves find_moves(const Graph& graph, std::span<const NodeId> sequence, int chain_depth);

class InsertionPricer {
 public:
  explicit InsertionPricer(const Graph& graph);

  // Indexes `sequence`, which must be valid, with `timeline` the simulator's memory at each of
  // its steps (simulate with SimulateOptions::timeline).
  void index(std::span<const NodeId> sequence, std::span<const int64_t> timeline);
  // The first position at or after `from` whose step reads an output of `step`; -1 if none.
  int32_t first_read_of(NodeId step, int32_t from) const;
  // The simulator's peak of the indexed sequence with `chain` inserted before position `at`
  // (0 <= at < its length); nullopt when the result is not valid (a step reads a value that no
  // copy holds there, or reruns a non-recomputable node).
  std::optional<int64_t> peak_with(std::span<const NodeId> chain, int32_t at);

  // The work of index() on `steps` steps reading `reads` values, in operations.
  static int64_t index_ops(int64_t steps, int64_t reads);
  // The work of peak_with() for a chain of `touches` input and output slots on `steps` steps.
  static int64_t price_ops(int64_t touches, int64_t steps);

 private:
  struct Touched {
    ValueId value;
    int32_t made = -1;           // chain position making it; -1: none
    int32_t last_old_read = -1;  // last chain position reading the copy before the chain's
    int32_t last_new_read = -1;  // last chain position reading the chain's copy
  };
  struct Copy {
    int32_t produced = -1;   // latest production before the insertion point; -1: none
    int32_t last_read = -1;  // its last read before the insertion point (or `produced`)
    bool lives_past =
        false;  // a read at or after the insertion point, or an output kept to the end
  };
  Copy copy_at(ValueId v, int32_t at) const;
  int64_t range_max(int32_t begin, int32_t end) const;  // [begin, end], begin <= end
  bool touch_chain(std::span<const NodeId> chain);

  const Graph& graph_;
  int32_t steps_ = 0;
  // CSR by value: positions of productions and of reads, ascending.
  std::vector<int32_t> made_begin_, made_at_, read_begin_, read_at_;
  std::vector<int64_t> memory_;                  // the simulator's memory at each step
  std::vector<int64_t> crossing_;                // live bytes carried from step t - 1 into step t
  std::vector<int64_t> suffix_max_;              // max of memory_ over [t, steps)
  std::vector<std::vector<int64_t>> max_table_;  // max_table_[k][t]: max over [t, t + 2^k)
  // Scratch of peak_with, kept between calls so pricing allocates nothing.
  std::vector<int32_t> slot_;  // by value: index into touched_, -1 when untouched
  std::vector<Touched> touched_;
  std::vector<std::pair<int32_t, int64_t>> changes_;  // (after, bytes): + bytes on (after, at)
  std::vector<int64_t> chain_delta_;
};

}  // namespace remat::greedy
