// segment_tree.h — range-add trees over the time slots of the annealing state (FastSA §2.1.1).
// MaxAddTree keeps A[0..n) under "add x to A[l..r]" in O(log n) and answers max(A) in O(1) at the
// root. Only the global maximum is ever asked for, so lazy adds are never pushed down: a node
// holds max(children) + its own pending add (the bottom-up, non-recursive variant), and one
// range add touches two root-to-leaf paths. Nodes are {max, add} pairs so a sibling pair and its
// parent sit in two cache lines.
// LogAddExpTree (Appendix C.2) is the same with log2(2^a + 2^b) in place of max: its root is a
// smooth maximum that also sees the second-highest peaks. Values are doubles in scaled units.
//   MaxAddTree tree(leaves);  tree.add(3, 7, 64);  int64_t peak = tree.max();
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
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
    for (int32_t i = size_ - 1; i >= 1; --i) pull(i);
    pending_.clear();
    pending_.reserve(64);
  }

  int32_t size() const { return size_; }
  // The combined value over all leaves (max, or the log-sum-exp).
  T root() const { return nodes_[1].value; }

  // Adds x to every leaf in [first, last] (inclusive); no-op when first > last.
  void add(int32_t first, int32_t last, T x) {
    add_deferred(first, last, x);
    rebuild();
  }

  // Batched form for one mutation's several interval updates: the adds are applied at once and
  // the ancestors of all their end leaves are recomputed together by rebuild(), each shared
  // ancestor once (the updates of one mutation mostly end at the same slot). root() is stale
  // until rebuild().
  void add_deferred(int32_t first, int32_t last, T x) {
    if (first > last) return;
    int32_t l = first + size_, r = last + size_ + 1;
    pending_.push_back(l);
    if (r - 1 != l) pending_.push_back(r - 1);
    // Branch-free: the parities of random ranges are coin flips, so every node on both borders
    // gets an add, of zero where the range does not cover it (r - 1 is covered when r is odd).
    while (l < r) {
      const int32_t take_l = l & 1, take_r = r & 1;
      apply(l, take_l ? x : T{});
      apply(r - 1, take_r ? x : T{});
      l = (l + take_l) >> 1;
      r = (r - take_r) >> 1;
    }
  }

  void rebuild() {
    if (pending_.empty()) return;
    // Parents of a sorted list are sorted, so one sort and then adjacent duplicates per level.
    // A mutation usually leaves a handful of end leaves: insertion sort, unless a unit with many
    // inputs left many.
    if (pending_.size() > 32) {
      std::sort(pending_.begin(), pending_.end());
    } else {
      for (size_t i = 1; i < pending_.size(); ++i) {
        const int32_t x = pending_[i];
        size_t j = i;
        for (; j > 0 && pending_[j - 1] > x; --j) pending_[j] = pending_[j - 1];
        pending_[j] = x;
      }
    }
    size_t count = pending_.size();
    while (pending_[0] > 1) {
      size_t kept = 0;
      for (size_t k = 0; k < count; ++k) {
        const int32_t parent = pending_[k] >> 1;
        if (kept == 0 || pending_[kept - 1] != parent) pending_[kept++] = parent;
      }
      count = kept;
      for (size_t k = 0; k < count; ++k) pull(pending_[k]);
    }
    pending_.clear();
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

  // A leaf's pending add is never read (leaf() and pull() read internal nodes' only).
  void apply(int32_t i, T x) {
    Node& n = nodes_[static_cast<size_t>(i)];
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
  std::vector<Node> nodes_;
  std::vector<int32_t> pending_;  // end leaves of deferred adds; keeps its capacity
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
