// state.h — the annealing state of FastSA §2.2: a fixed-length vector of time slots, each empty
// (nop) or holding one unit, with the memory over time kept incrementally.
// Invariant: tree leaf t = (live bytes at t) + temp of the unit at t, minus kNopOffset when slot t
// is a nop, so the root of the max tree plus the resident bytes is the peak over the occupied
// slots, which equals remat::simulate's peak of the sequence with the nops removed
// (docs/design.md, "Sequences and the simulator rule"). Per value, the sorted production and use
// times give the interval updates of §2.2.1 (extend, shrink, split, merge) as at most two range
// adds, and the validity checks of §2.2 in O(1) (only the first production and first use matter).
//   SaState s(units, 1 << 16, units.initial_order);
//   if (s.can_add(u, t)) { s.add(u, t); ...; s.undo_last(); }  // the state before the add
//   int64_t peak = s.peak();
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "segment_tree.h"
#include "time_lists.h"
#include "units.h"

namespace remat::fastsa {

inline constexpr int32_t kNop = -1;

class SaState {
 public:
  // Places `order` evenly: unit i of k at slot floor((i + 1) * slots / (k + 1)) (Appendix D.4).
  // `slots` must be a power of two larger than order.size(). With `soft_peak_scale` > 0 a
  // log-add-exp tree (Appendix C.2) is kept beside the max tree, over sizes times that scale.
  SaState(const UnitTable& units, int32_t slots, std::span<const int32_t> order,
          double soft_peak_scale = 0);

  int32_t num_slots() const { return slots_; }
  int32_t unit_at(int32_t t) const { return slot_[static_cast<size_t>(t)]; }
  bool is_nop(int32_t t) const { return slot_[static_cast<size_t>(t)] == kNop; }
  int32_t num_occupied() const { return static_cast<int32_t>(occupied_.size()); }
  // The i-th occupied slot, in no particular order (for uniform sampling).
  int32_t occupied_slot(int32_t i) const { return occupied_[static_cast<size_t>(i)]; }

  int64_t peak() const { return max_tree_.root() + units_->resident_bytes; }
  // An occupied slot where the memory is peak(): the leftmost with ties = 0, else where the
  // bits of `ties` lead among equal ones (MaxAddTree::argmax); O(log slots).
  int32_t peak_slot(uint64_t ties = 0) const { return max_tree_.argmax(ties); }
  // The first production of value v (kNoTime when none).
  int32_t first_production(int32_t v) const { return times_.first(v).production; }
  // log2 of sum over occupied slots of 2^(scaled memory), back in bytes; needs soft_peak_scale.
  double soft_peak() const;
  double cost() const { return cost_; }

  // Validity of §2.2. Each assumes the slot preconditions (t a nop for add, t occupied for
  // remove, t1 occupied and t2 a nop for move); non-recomputable units may only move.
  bool can_add(int32_t unit, int32_t t) const;
  bool can_remove(int32_t t) const;
  bool can_move(int32_t from, int32_t to) const;
  // True when `unit` has outputs and slot t is after the first production of each: a copy
  // there is a recomputation (mode=fixed-order adds and removes only those).
  bool after_first_production(int32_t unit, int32_t t) const;
  // The open interval (lo, hi) of slots the unit at `from` can move to: after the first
  // production of each input, and before the first use of each output it first produces.
  std::pair<int32_t, int32_t> move_range(int32_t from) const;
  void add(int32_t unit, int32_t t);
  void remove(int32_t t);
  void move(int32_t from, int32_t to);  // remove at `from`, add the same unit at `to`
  // Undoes the last add, remove or move: the slots and times by the inverse mutation (§2.2), the
  // max tree from its undo log (without a log-add-exp tree; with one, both by the inverse).
  void undo_last();

  // Whether every leaf of the trees equals its value computed from scratch (the live bytes of
  // each value's productions and uses, plus the temps): the invariant the incremental updates
  // keep. O(slots + edges), for tests.
  bool trees_match_rebuild() const;

  // Units in slot order, nops left out.
  std::vector<int32_t> sequence() const;

 private:
  // Interval updates are deferred in the trees and rebuilt once per add, remove or move.
  void add_deferred(int32_t unit, int32_t t);
  void remove_deferred(int32_t t);
  // An undo's changes but the trees': the times and slots of removing the unit at t, and of
  // adding `unit` at t (the tree comes back from its undo log).
  void take_back(int32_t t);
  void put_back(int32_t unit, int32_t t);
  // take_back(from) then put_back(unit, to) in one pass over each value's times.
  void move_back(int32_t from, int32_t to);
  void prefetch_times(int32_t unit) const;
  void add_live(int32_t first, int32_t last, int64_t bytes);
  void rebuild_trees();
  void add_use(int32_t v, int32_t t);
  void remove_use(int32_t v, int32_t t);
  void add_production(int32_t v, int32_t t);
  void remove_production(int32_t v, int32_t t);
  // End of the interval opened by the production at p when the next production is `next`
  // (kNoTime: none): the last use in (p, next), p when there is none, the end for an output.
  int32_t interval_end(int32_t v, int32_t p, int32_t next) const;
  void place(int32_t unit, int32_t t);
  void place_all(std::span<const int32_t> order);
  void clear(int32_t t);
  // The slot bookkeeping of place and clear (slots, occupied slots, cost), without the trees.
  void occupy(int32_t unit, int32_t t);
  void vacate(int32_t t);
  // The leaves of the max tree and the log-add-exp tree from the slots and times alone.
  void leaves_from_scratch(std::vector<int64_t>& leaves, std::vector<double>& soft) const;

  const UnitTable* units_;
  int32_t slots_ = 0;
  std::vector<int32_t> slot_;          // unit or kNop, by time
  std::vector<int32_t> occupied_;      // occupied slots
  std::vector<int32_t> occupied_pos_;  // index in occupied_, by time
  ValueTimes times_;                   // productions and uses, by value
  enum class Mutation { kNone, kAdd, kRemove, kMove };
  struct LastMutation {
    Mutation kind = Mutation::kNone;
    int32_t unit = kNop;
    int32_t from = -1;  // kRemove, kMove
    int32_t to = -1;    // kAdd, kMove
  };
  LastMutation last_;
  MaxAddTree max_tree_;
  LogAddExpTree soft_tree_;
  double soft_scale_ = 0;
  double cost_ = 0;
};

}  // namespace remat::fastsa
