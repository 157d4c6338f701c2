// segment_tree.h — range-add trees over the time slots of the annealing state (FastSA §2.1.1).
// MaxAddTree keeps A[0..n) under "add x to A[l..r]" in O(log n) and answers max(A) in O(1) at the
// root. Only the global maximum is ever asked for, so lazy adds are never pushed down: a node
// holds max(children) + its own pending add (the bottom-up, non-recursive variant), and one
// range add touches two root-to-leaf paths. Nodes are {max, add} pairs so a sibling pair and its
// parent sit in two cache lines. One mutation of the annealing makes a few range adds that mostly
// share ends or cancel (a move shrinks a value's interval and extends it again): in the integer
// tree they are deferred, merged into disjoint ranges and applied at once, and the ancestors of
// all their ends are recomputed once each.
// An annealing step mostly rejects its mutation: with the undo log on, every node write first
// saves the node it overwrites, and restore() writes them back, so a rejected mutation is taken
// back exactly (no second sort, range application and climb) and the tree is as before it.
// LogAddExpTree (Appendix C.2) is the same with log2(2^a + 2^b) in place of max: its root is a
// smooth maximum that also sees the second-highest peaks. Values are doubles in scaled units.
//   MaxAddTree tree(leaves);  tree.add(3, 7, 64);  int64_t peak = tree.max();
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

namespace remat::fastsa {

template <class T, class Combine>
class RangeAddTree {
 public:
  RangeAddTree() = default;
  // `leaves.size()` must be a power of two.
  explicit RangeAddTree(std::span<const T> leaves) { reset(leaves); }

  void reset(std::span<const T> leaves) {
    size_ = static_cast<int32_t>(leaves.size());
    nodes_.assign(2 * leaves.size(), Node{});
    for (int32_t i = 0; i < size_; ++i)
      nodes_[static_cast<size_t>(size_ + i)].value = leaves[static_cast<size_t>(i)];
    height_ = std::bit_width(static_cast<uint32_t>(size_)) - 1;
    for (int32_t i = size_ - 1; i >= 1; --i) pull(i);
    ends_.clear();
    ends_.reserve(64);
    events_.clear();
    events_.reserve(64);
    points_.clear();
    points_.reserve(8);
    logged_ = 0;
  }

  int32_t size() const { return size_; }
  // The combined value over all leaves (max, or the log-sum-exp).
  T root() const { return nodes_[1].value; }

  // Adds x to every leaf in [first, last] (inclusive); no-op when first > last.
  void add(int32_t first, int32_t last, T x) {
    add_deferred(first, last, x);
    rebuild();
  }

  // Batched form for one mutation's several interval updates: root() is stale until rebuild(),
  // which applies the adds (integers: merged into disjoint ranges first; integer adds are exact,
  // so the leaves are the same as one add at a time) and recomputes the ancestors of the ranges'
  // end leaves, each once.
  void add_deferred(int32_t first, int32_t last, T x) {
    if (first > last) return;
    if constexpr (kMergeAdds) {
      events_.push_back({first, x});
      events_.push_back({last + 1, -x});
    } else {
      apply_range(first, last, x);
    }
  }

  // Adds x to leaf i at once, its ancestors recomputed by the next rebuild() (integer trees).
  // A slot's own change (its unit's temp) as a range would split the steps of the intervals that
  // end there, each split a border walked up the tree; as a point it is one leaf and one climb.
  void add_to_leaf_deferred(int32_t i, T x) {
    static_assert(kMergeAdds, "points are applied out of order: integer trees only");
    Saved* log = log_room(1);
    apply(i + size_, x, log);
    log_done(log);
    points_.push_back(i);
  }

  void rebuild() {
    if constexpr (kMergeAdds) {
      apply_events();  // ranges in slot order: their ends come sorted
      // The leaves of the point adds go in among them (a mutation has at most two).
      for (const int32_t point : points_) {
        ends_.push_back(point);
        for (size_t k = ends_.size() - 1; k > 0 && ends_[k - 1] > point; --k)
          std::swap(ends_[k - 1], ends_[k]);
      }
      points_.clear();
    } else if (ends_.size() > 32) {
      std::sort(ends_.begin(), ends_.end());
    } else {
      insertion_sort(ends_, [](int32_t e) { return e; });
    }
    pull_ancestors_of_ends();
  }

  // While on, node writes are logged for restore(), from the last clear_undo_log() on.
  void keep_undo_log(bool on) {
    logging_ = on;
    logged_ = 0;
  }
  void clear_undo_log() { logged_ = 0; }
  // Puts back every node written since clear_undo_log(), latest write first, so each ends at the
  // value it had then; pending deferred adds are not in the log (call after rebuild()).
  void restore() {
    for (size_t k = logged_; k-- > 0;)
      nodes_[static_cast<size_t>(undo_log_[k].index)] = undo_log_[k].node;
    logged_ = 0;
  }

  // A leaf whose value is root(): from the root down, the child that holds the larger value (a
  // node's value is its larger child's plus its own pending add). Where both children hold it,
  // the next bit of `ties` (lowest first, then again from the lowest) picks the right one, so
  // the leftmost such leaf with ties = 0. O(log n).
  int32_t argmax(uint64_t ties = 0) const {
    int32_t node = 1;
    uint64_t bits = ties;
    while (node < size_) {
      const int32_t left = 2 * node;
      const T l = nodes_[static_cast<size_t>(left)].value;
      const T r = nodes_[static_cast<size_t>(left + 1)].value;
      if (l == r) {
        if (bits == 0) bits = ties;
        node = left + static_cast<int32_t>(bits & 1);
        bits >>= 1;
      } else {
        node = r > l ? left + 1 : left;
      }
    }
    return node - size_;
  }

  // The value of one leaf (sum of the pending adds on its path); O(log n), for tests.
  T leaf(int32_t i) const {
    int32_t k = i + size_;
    T x = nodes_[static_cast<size_t>(k)].value;
    for (k >>= 1; k >= 1; k >>= 1) x += nodes_[static_cast<size_t>(k)].pending;
    return x;
  }

 private:
  struct Node {
    T value{};    // combine(children) + pending; the leaf value for leaves
    T pending{};  // add applied to the whole subtree (read for internal nodes only)
  };

  struct Saved {
    int32_t index;
    Node node;
  };

  // Floating-point adds do not commute exactly: those are applied as they come, in order.
  static constexpr bool kMergeAdds = std::is_integral_v<T>;
  struct Event {
    int32_t slot;  // the add starts here (x) or ends just before (-x)
    T x;
  };

  template <class V, class Key>
  static void insertion_sort(std::vector<V>& v, Key key) {
    for (size_t i = 1; i < v.size(); ++i) {
      const V x = v[i];
      size_t j = i;
      for (; j > 0 && key(v[j - 1]) > key(x); --j) v[j] = v[j - 1];
      v[j] = x;
    }
  }

  // Branch-free: the parities of random ranges are coin flips, so every node on both borders
  // gets an add, of zero where the range does not cover it (r - 1 is covered when r is odd).
  void apply_range(int32_t first, int32_t last, T x) {
    int32_t l = first + size_, r = last + size_ + 1;
    ends_.push_back(first);
    if (last != first) ends_.push_back(last);
    Saved* log = log_room(2 * static_cast<size_t>(height_ + 1));
    while (l < r) {
      const int32_t take_l = l & 1, take_r = r & 1;
      apply(l, take_l ? x : T{}, log);
      apply(r - 1, take_r ? x : T{}, log);
      l = (l + take_l) >> 1;
      r = (r - take_r) >> 1;
    }
    log_done(log);
  }

  // The deferred adds as a step function over the slots: sorted by slot, summed, and applied as
  // one range per step where the sum is not zero.
  void apply_events() {
    if (events_.size() > 32) {
      std::sort(events_.begin(), events_.end(),
                [](const Event& a, const Event& b) { return a.slot < b.slot; });
    } else {
      insertion_sort(events_, [](const Event& e) { return e.slot; });
    }
    T sum{};
    for (size_t k = 0; k < events_.size();) {
      const int32_t slot = events_[k].slot;
      for (; k < events_.size() && events_[k].slot == slot; ++k) sum += events_[k].x;
      // After the last event the sum is back to zero; a step from `size_` covers no slot.
      if (sum != T{} && k < events_.size() && slot < size_)
        apply_range(slot, events_[k].slot - 1, sum);
    }
    events_.clear();
  }

  // Every ancestor of the end leaves, once each and after its children. With the ends sorted, a
  // node above several of them is recomputed on the path of the last one: the path of end i
  // stops below its lowest common ancestor with end i + 1, which lies bit_width(e_i ^ e_i+1)
  // levels up (a repeated end adds nothing).
  void pull_ancestors_of_ends() {
    const size_t count = ends_.size();
    Saved* log = log_room(count * static_cast<size_t>(height_));
    for (size_t k = 0; k < count; ++k) {
      const int32_t end = ends_[k];
      const int32_t levels =
          k + 1 < count
              ? static_cast<int32_t>(std::bit_width(static_cast<uint32_t>(end ^ ends_[k + 1]))) - 1
              : height_;
      // The value just computed stays in a register: each level loads only the sibling (final
      // by then) and the pending add, so the climb does not wait on its own stores. (Both
      // combines are symmetric to the bit, so the order of the two children does not matter.)
      int32_t node = end + size_;
      T value = nodes_[static_cast<size_t>(node)].value;
      for (int32_t level = 1; level <= levels; ++level) {
        const T sibling = nodes_[static_cast<size_t>(node ^ 1)].value;
        node >>= 1;
        Node& n = nodes_[static_cast<size_t>(node)];
        if (log != nullptr) *log++ = {node, n};
        value = Combine{}(value, sibling) + n.pending;
        n.value = value;
      }
    }
    log_done(log);
    ends_.clear();
  }

  // Where the next `writes` writes are logged (nullptr: no log); log_done(end) takes the log up
  // to `end`. The writes go through a local pointer: the log's size as a member would be
  // reloaded after every node store (an int64_t store may alias a size_t).
  Saved* log_room(size_t writes) {
    if (!logging_) return nullptr;
    if (logged_ + writes > undo_log_.size()) undo_log_.resize(2 * (logged_ + writes));
    return undo_log_.data() + logged_;
  }
  void log_done(const Saved* end) {
    if (end != nullptr) logged_ = static_cast<size_t>(end - undo_log_.data());
  }

  // A leaf's pending add is never read (leaf() and pull() read internal nodes' only).
  void apply(int32_t i, T x, Saved*& log) {
    Node& n = nodes_[static_cast<size_t>(i)];
    if (log != nullptr) *log++ = {i, n};
    n.value += x;
    n.pending += x;
  }
  void pull(int32_t i) {
    Node& n = nodes_[static_cast<size_t>(i)];
    n.value = Combine{}(nodes_[static_cast<size_t>(2 * i)].value,
                        nodes_[static_cast<size_t>(2 * i + 1)].value) +
              n.pending;
  }

  int32_t size_ = 0;
  int32_t height_ = 0;  // levels above the leaves
  std::vector<Node> nodes_;
  std::vector<int32_t> ends_;    // end leaves of applied adds; keeps its capacity
  std::vector<Event> events_;    // deferred adds (integers); keeps its capacity
  std::vector<int32_t> points_;  // leaves added to since the last rebuild; keeps its capacity
  bool logging_ = false;
  // Nodes as they were before each write: the first logged_ entries (the rest is room).
  std::vector<Saved> undo_log_;
  size_t logged_ = 0;
};

struct MaxOf {
  int64_t operator()(int64_t a, int64_t b) const { return std::max(a, b); }
};
// log2(2^a + 2^b), computed from the larger term so it never overflows.
struct LogAddExp2 {
  double operator()(double a, double b) const {
    const double hi = std::max(a, b), lo = std::min(a, b);
    return hi + std::log2(1.0 + std::exp2(lo - hi));
  }
};

using MaxAddTree = RangeAddTree<int64_t, MaxOf>;
using LogAddExpTree = RangeAddTree<double, LogAddExp2>;

}  // namespace remat::fastsa
