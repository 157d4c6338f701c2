// time_lists.h — per value, the sorted slot times of its productions and of its uses, all in one
// flat array: each value owns a run there, its productions followed by its uses, and a run that
// fills moves to the array's end with a quarter more room (when the array would have to grow for
// it, the runs are packed first, the rooms of moved runs dropped). A value's record (where its run
// is, and its first production, second production and first use, which the validity checks read)
// fills half a cache line. The annealer inserts and erases times of several values on every
// mutation and reads both lists of each; on a large graph every value it touches is a cache miss,
// so a value's update reads two lines (its record and its run), and no step allocates.
//   ValueTimes times;
//   times.reset(productions_per_value, uses_per_value);  // room for these and some spare
//   times.insert_use(v, t);                               // keeps the list sorted
//   std::span<const int32_t> p = times.productions(v);
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "remat/error.h"

namespace remat::fastsa {

inline constexpr int32_t kNoTime = 0x7fffffff;  // "none" for a time; later than every slot

// The number of times in the sorted [first, first + n) before t (std::lower_bound's index).
// Without branches on the data: the search's compares are coin flips, and a mispredicted branch
// per level costs more than the few loads of these short lists.
inline int32_t count_before(const int32_t* first, int32_t n, int32_t t) {
  if (n == 0) return 0;
  const int32_t* base = first;
  while (n > 1) {
    const int32_t half = n / 2;
    base = base[half] < t ? base + half : base;
    n -= half;
  }
  return static_cast<int32_t>(base - first) + (*base < t ? 1 : 0);
}
inline int32_t count_before(std::span<const int32_t> times, int32_t t) {
  return count_before(times.data(), static_cast<int32_t>(times.size()), t);
}

// What the validity checks read of a value (kNoTime when absent).
struct FirstTimes {
  int32_t production = kNoTime;
  int32_t second_production = kNoTime;
  int32_t use = kNoTime;
};

class ValueTimes {
 public:
  // Empty lists, with room for productions[v] + uses[v] times of value v (and some spare) before
  // its run moves.
  void reset(std::span<const int32_t> productions, std::span<const int32_t> uses) {
    runs_.assign(productions.size(), Run{});
    int64_t total = 0;
    for (size_t v = 0; v < productions.size(); ++v) {
      runs_[v] = Run{.begin = checked_begin(total), .capacity = room_for(productions[v] + uses[v])};
      total += runs_[v].capacity;
    }
    times_.reserve(static_cast<size_t>(total + total / kSpareDivisor));
    times_.assign(static_cast<size_t>(total), 0);
  }

  const FirstTimes& first(int32_t v) const { return run(v).first; }

  // Asks for v's times ahead of their use: a mutation updates every input and output of its
  // unit, and on a large graph each is a cache miss; asked for together, the misses overlap.
  void prefetch(int32_t v) const { __builtin_prefetch(times_.data() + run(v).begin); }

  std::span<const int32_t> productions(int32_t v) const {
    const Run& r = run(v);
    return {times_.data() + r.begin, static_cast<size_t>(r.productions)};
  }
  std::span<const int32_t> uses(int32_t v) const {
    const Run& r = run(v);
    return {times_.data() + r.begin + r.productions, static_cast<size_t>(r.uses)};
  }

  // Inserts t at `index` of v's productions (where it keeps them sorted).
  void insert_production_at(int32_t v, int32_t index, int32_t t) {
    Run& r = room_for_one(v);
    int32_t* data = times_.data() + r.begin;
    std::copy_backward(data + index, data + r.productions + r.uses,
                       data + r.productions + r.uses + 1);
    data[index] = t;
    ++r.productions;
    refresh_first(r);
  }
  void insert_use(int32_t v, int32_t t) {
    Run& r = room_for_one(v);
    // One pass from the end, shifting as it searches: a call to memmove costs more than the
    // copy of the few uses after t.
    int32_t* uses = times_.data() + r.begin + r.productions;
    int32_t j = r.uses;
    for (; j > 0 && uses[j - 1] > t; --j) uses[j] = uses[j - 1];
    uses[j] = t;
    ++r.uses;
    refresh_first(r);
  }

  // Moves one time `from` of v's productions (uses) to `to`, keeping them sorted: the undo of a
  // move, one shift of the times between the two instead of an erase and an insert.
  void replace_production(int32_t v, int32_t from, int32_t to) {
    Run& r = runs_[static_cast<size_t>(v)];
    replace(times_.data() + r.begin, r.productions, from, to);
    refresh_first(r);
  }
  void replace_use(int32_t v, int32_t from, int32_t to) {
    Run& r = runs_[static_cast<size_t>(v)];
    replace(times_.data() + r.begin + r.productions, r.uses, from, to);
    refresh_first(r);
  }

  // Appends t to v's productions (uses), no earlier than each of them: a layout in slot order,
  // every production placed before the first use.
  void push_production(int32_t v, int32_t t) {
    Run& r = room_for_one(v);
    REMAT_CHECK(r.uses == 0, "fastsa: a production appended after a use");
    times_[static_cast<size_t>(r.begin + r.productions)] = t;
    ++r.productions;
    refresh_first(r);
  }
  void push_use(int32_t v, int32_t t) {
    Run& r = room_for_one(v);
    times_[static_cast<size_t>(r.begin + r.productions + r.uses)] = t;
    ++r.uses;
    refresh_first(r);
  }

  void erase_production(int32_t v, int32_t t) {
    Run& r = runs_[static_cast<size_t>(v)];
    int32_t* data = times_.data() + r.begin;
    erase(data, data + r.productions, data + r.productions + r.uses, t);
    --r.productions;
    refresh_first(r);
  }
  void erase_use(int32_t v, int32_t t) {
    Run& r = runs_[static_cast<size_t>(v)];
    int32_t* uses = times_.data() + r.begin + r.productions;
    erase(uses, uses + r.uses, uses + r.uses, t);
    --r.uses;
    refresh_first(r);
  }

 private:
  struct alignas(32) Run {
    int32_t begin = 0;  // in times_
    int32_t productions = 0;
    int32_t uses = 0;
    int32_t capacity = 0;
    FirstTimes first;
  };

  void refresh_first(Run& r) const {
    const int32_t* data = times_.data() + r.begin;
    r.first.production = r.productions > 0 ? data[0] : kNoTime;
    r.first.second_production = r.productions > 1 ? data[1] : kNoTime;
    r.first.use = r.uses > 0 ? data[r.productions] : kNoTime;
  }

  static int32_t checked_begin(int64_t begin) {
    REMAT_CHECK(begin < (int64_t{1} << 31) - (int64_t{1} << 28),
                "fastsa: more value times than the state can index");
    return static_cast<int32_t>(begin);
  }

  static int32_t room_for(int32_t times) { return times + times / 4 + 4; }

  const Run& run(int32_t v) const { return runs_[static_cast<size_t>(v)]; }

  // The array's spare room, a fraction of the runs' (1 / kSpareDivisor), for runs that move.
  static constexpr int64_t kSpareDivisor = 4;

  // v's run, with room for one more time: a full run moves to the end of the array with a
  // quarter more room (its old room is left unused until the next pack).
  Run& room_for_one(int32_t v) {
    Run& r = runs_[static_cast<size_t>(v)];
    if (r.productions + r.uses < r.capacity) return r;
    const int32_t capacity = room_for(r.capacity);
    if (times_.size() + static_cast<size_t>(capacity) > times_.capacity()) pack(capacity);
    const int32_t begin = checked_begin(static_cast<int64_t>(times_.size()));
    times_.resize(static_cast<size_t>(begin) + static_cast<size_t>(capacity));
    std::copy_n(times_.begin() + r.begin, r.productions + r.uses, times_.begin() + begin);
    r.begin = begin;
    r.capacity = capacity;
    return r;
  }

  // Copies every run into a new array, in value order and without the rooms runs moved out of,
  // with spare room for runs that move, `more` at least.
  void pack(int32_t more) {
    int64_t total = 0;
    for (const Run& r : runs_) total += r.capacity;
    std::vector<int32_t> packed;
    packed.reserve(static_cast<size_t>(total + std::max<int64_t>(more, total / kSpareDivisor)));
    for (Run& r : runs_) {
      const auto from = times_.begin() + r.begin;
      r.begin = checked_begin(static_cast<int64_t>(packed.size()));
      packed.insert(packed.end(), from, from + r.capacity);
    }
    times_.swap(packed);
  }

  // Replaces `from` in the sorted [a, a + n) by `to`, moving the times between them by one.
  static void replace(int32_t* a, int32_t n, int32_t from, int32_t to) {
    int32_t i = count_before(a, n, from);
    REMAT_CHECK(i < n && a[i] == from, "fastsa: time missing from a value's set");
    for (; i + 1 < n && a[i + 1] < to; ++i) a[i] = a[i + 1];
    for (; i > 0 && a[i - 1] > to; --i) a[i] = a[i - 1];
    a[i] = to;
  }

  // Erases t from the sorted [first, last), shifting [last, end) down with it.
  static void erase(int32_t* first, int32_t* last, int32_t* end, int32_t t) {
    int32_t* it = first + count_before(first, static_cast<int32_t>(last - first), t);
    REMAT_CHECK(it != last && *it == t, "fastsa: time missing from a value's set");
    std::copy(it + 1, end, it);
  }

  std::vector<Run> runs_;
  std::vector<int32_t> times_;
};

}  // namespace remat::fastsa
