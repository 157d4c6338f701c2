// time_lists.h — per value, a sorted list of slot times (its productions, or its uses), all in
// one flat array: each value owns a run of capacity there, and a run that fills moves to the
// array's end with twice the room. The annealer inserts and erases a time on every mutation; with
// one vector per value that was an allocation now and then and a pointer chase always, here it
// is a shift within a run that sits beside the others.
//   SortedTimeLists uses;
//   uses.reset(counts);            // room for counts[v] times of value v
//   uses.insert(v, t);             // keeps the list sorted
//   std::span<const int32_t> ts = uses.of(v);
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "remat/error.h"

namespace remat::fastsa {

class SortedTimeLists {
 public:
  // Empty lists, with room for expected[v] times of value v (and some spare) before a run moves.
  void reset(std::span<const int32_t> expected) {
    runs_.assign(expected.size(), Run{});
    int64_t total = 0;
    for (size_t v = 0; v < expected.size(); ++v) {
      runs_[v] = Run{.begin = total, .size = 0, .capacity = room_for(expected[v])};
      total += runs_[v].capacity;
    }
    times_.assign(static_cast<size_t>(total), 0);
  }

  std::span<const int32_t> of(int32_t v) const {
    const Run& r = runs_[static_cast<size_t>(v)];
    return {times_.data() + r.begin, static_cast<size_t>(r.size)};
  }

  // Index of the first time of v not below t.
  int32_t lower_bound(int32_t v, int32_t t) const {
    const std::span<const int32_t> ts = of(v);
    return static_cast<int32_t>(std::lower_bound(ts.begin(), ts.end(), t) - ts.begin());
  }

  // Inserts t at `index` (lower_bound(v, t): the list stays sorted).
  void insert_at(int32_t v, int32_t index, int32_t t) {
    Run& r = runs_[static_cast<size_t>(v)];
    if (r.size == r.capacity) grow(r);
    int32_t* data = times_.data() + r.begin;
    std::copy_backward(data + index, data + r.size, data + r.size + 1);
    data[index] = t;
    ++r.size;
  }
  void insert(int32_t v, int32_t t) { insert_at(v, lower_bound(v, t), t); }

  // Appends t, no earlier than every time of v (a layout in slot order).
  void push_back(int32_t v, int32_t t) {
    Run& r = runs_[static_cast<size_t>(v)];
    if (r.size == r.capacity) grow(r);
    times_[static_cast<size_t>(r.begin + r.size)] = t;
    ++r.size;
  }

  void erase(int32_t v, int32_t t) {
    Run& r = runs_[static_cast<size_t>(v)];
    int32_t* data = times_.data() + r.begin;
    int32_t* it = std::lower_bound(data, data + r.size, t);
    REMAT_CHECK(it != data + r.size && *it == t, "fastsa: time missing from a value's set");
    std::copy(it + 1, data + r.size, it);
    --r.size;
  }

 private:
  struct Run {
    int64_t begin = 0;  // in times_
    int32_t size = 0;
    int32_t capacity = 0;
  };

  static int32_t room_for(int32_t expected) { return std::max(4, expected + expected / 2 + 2); }

  // Moves a full run to the end of the array with twice its room (its old room is left unused).
  void grow(Run& r) {
    const auto begin = static_cast<int64_t>(times_.size());
    const int32_t capacity = 2 * r.capacity;
    times_.resize(static_cast<size_t>(begin + capacity));
    std::copy_n(times_.begin() + r.begin, r.size, times_.begin() + begin);
    r.begin = begin;
    r.capacity = capacity;
  }

  std::vector<Run> runs_;
  std::vector<int32_t> times_;
};

}  // namespace remat::fastsa
