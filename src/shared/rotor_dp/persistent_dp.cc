// Algorithm 3 / 4 of the Rotor paper (Theorem 4.8). C(s, t, m): the least makespan of the
// sub-chain s..t when a^{s-1} (not counted in m) and δ^t are stored, within memory m, ending with
// δ^{s-1}. The paper fills the table m-major; here each (s, t) row holds every m at once, so each
// decomposition is one vectorised pass over m, and rows are filled in tiles (TiledFill) so that
// each row read from the table serves many rows while in cache.
// Saturation: from the memory sat(s, t) that the store-all sequence of the sub-chain needs, the
// value is the no-recomputation makespan; only m < sat(s, t) is computed, the rest is filled.
#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>

#include "dp.h"
#include "remat/error.h"

namespace remat::rotor {
namespace {

// m∅(s,t) and m_all(s,t) of Theorem 4.8, in the size type of the chain.
template <class Size>
class PersistentBounds {
 public:
  explicit PersistentBounds(const ChainArrays<Size>& c) : c_(c), n_(c.n) {
    forward_.assign(static_cast<size_t>((n_ + 1) * (n_ + 1)), 0);
    for (int s = 1; s <= n_; ++s) {
      Size peak = c.a[s] + c.of[s];  // F_ck^s
      for (int t = s; t <= n_; ++t) {
        if (t > s + 1) peak = std::max<Size>(peak, c.a[t - 2] + c.a[t - 1] + c.of[t - 1]);
        forward_[index(s, t)] = peak;  // F_∅^j for s < j < t
      }
    }
  }
  // Memory to run F_ck^s then F_∅^{s+1..t-1} with δ^t stored (a^{s-1} not counted).
  Size none(int s, int t) const { return c_.delta[t] + forward_[index(s, t)]; }
  // Memory to run F_all^s with δ^t stored, and later B^s.
  Size all(int s, int t) const { return forward_all_memory(c_, s, t); }

 private:
  size_t index(int s, int t) const { return static_cast<size_t>(s * (n_ + 1) + t); }
  const ChainArrays<Size>& c_;
  int n_;
  std::vector<Size> forward_;
};

// Rows (s, t), 1 <= s <= t <= n, each of width + 1 floats (single precision halves the memory
// traffic that bounds this DP; a relative rounding of 1e-7 only matters between near-equal plans,
// and every reported makespan comes from the simulator anyway).
using Value = float;
constexpr Value kInf = kInfinityF;

// The table's entries, uninitialised: each tile writes its rows before anything reads them. A large
// table is aligned on huge pages and the kernel asked to back it with them (transparent huge
// pages, a hint that may be ignored): the split loop reads rows that lie far apart in a table of
// up to gigabytes, and with 4 KiB pages most of those reads would also miss the TLB.
class TableMemory {
 public:
  explicit TableMemory(size_t count) {
    const size_t bytes = std::max<size_t>(1, count) * sizeof(Value);
    const size_t align = bytes >= 4 * kHugePage ? kHugePage : 64;
    const size_t rounded = (bytes + align - 1) / align * align;  // aligned_alloc needs a multiple
    data_.reset(static_cast<Value*>(std::aligned_alloc(align, rounded)));
    if (!data_) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (align == kHugePage) madvise(data_.get(), rounded, MADV_HUGEPAGE);
#endif
  }
  Value* data() { return data_.get(); }
  const Value* data() const { return data_.get(); }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;
  struct Free {
    void operator()(Value* p) const { std::free(p); }
  };
  std::unique_ptr<Value[], Free> data_;
};

// What the split loop reads of a row before touching it: its first finite m and its last entry.
// Kept column by column (all s of one t together): the loop over splits of row (s, t) walks the
// rows (s2, t) of column t, which lie far apart in the table, and reads these two of each from
// consecutive memory here. The same size as the first finite m per row that it replaces.
struct RowSummary {
  int32_t first;  // first finite m (width when none)
  Value last;     // the entry at the largest m
};

class TriangleTable {
 public:
  TriangleTable(int n, int32_t max_m)
      : n_(n), width_(max_m + 1), values_(static_cast<size_t>(int64_t{n} * (n + 1) / 2 * width_)) {
    offset_.assign(static_cast<size_t>(n + 2), 0);
    for (int s = 1; s <= n; ++s) offset_[s + 1] = offset_[s] + (n - s + 1);
    column_offset_.assign(static_cast<size_t>(n + 2), 0);
    for (int t = 1; t <= n; ++t) column_offset_[t + 1] = column_offset_[t] + t;
    const int64_t rows = offset_[n + 1];
    summary_.assign(static_cast<size_t>(rows), {static_cast<int32_t>(width_), kInf});
  }
  Value* row(int s, int t) { return values_.data() + id(s, t) * width_; }
  const Value* row(int s, int t) const { return values_.data() + id(s, t) * width_; }
  // The summaries of rows (s, t) for s = 1..t, at index s - 1.
  const RowSummary* column(int t) const { return summary_.data() + column_offset_[t]; }
  const RowSummary& summary(int s, int t) const { return column(t)[s - 1]; }
  // Once row (s, t) is filled.
  void summarise(int s, int t) {
    const Value* r = row(s, t);
    summary_[static_cast<size_t>(column_offset_[t] + s - 1)] = {
        static_cast<int32_t>(first_finite(r, width_)), r[width_ - 1]};
  }
  int64_t width() const { return width_; }
  int64_t rows() const { return offset_[n_ + 1]; }
  int64_t relaxed = 0;  // entries relaxed, for the statistics

 private:
  int64_t id(int s, int t) const { return offset_[s] + (t - s); }
  int n_;
  int64_t width_;
  std::vector<int64_t> offset_, column_offset_;
  TableMemory values_;
  std::vector<RowSummary> summary_;  // column by column
};

// sat(s, t) and the makespan of the store-all sequence of each sub-chain (Rotor family only).
class Saturation {
 public:
  Saturation(const ChainArrays<int32_t>& c, PersistentFamily family, int64_t width)
      : n_(c.n),
        memory_(static_cast<size_t>((n_ + 2) * (n_ + 2)), width),
        makespan_(memory_.size(), 0) {
    if (family != PersistentFamily::kRotor) return;  // revolve never stores all
    for (int s = 1; s <= n_; ++s) {
      int64_t stored = 0, forward = 0, backward = 0;
      for (int t = s; t <= n_; ++t) {
        stored += c.abar[t];  // ā^s..ā^t (a^{s-1} is not counted)
        forward = std::max<int64_t>(forward, stored + c.of[t]);
        backward = std::max<int64_t>(backward, stored + c.delta[t] + c.delta[t - 1] + c.ob[t]);
        memory_[index(s, t)] = std::min<int64_t>(width, std::max(c.delta[t] + forward, backward));
      }
    }
    for (int t = 1; t <= n_; ++t) {  // same order of additions as the DP's F_all branch
      makespan_[index(t, t)] = c.uf[t] + c.ub[t];
      for (int s = t - 1; s >= 1; --s)
        makespan_[index(s, t)] = (c.uf[s] + c.ub[s]) + makespan_[index(s + 1, t)];
    }
  }
  int64_t memory(int s, int t) const { return memory_[index(s, t)]; }
  double makespan(int s, int t) const { return makespan_[index(s, t)]; }

 private:
  size_t index(int s, int t) const { return static_cast<size_t>(s * (n_ + 2) + t); }
  int n_;
  std::vector<int64_t> memory_;
  std::vector<double> makespan_;
};

// Fills the table tile by tile: tiles of `block` consecutive s by `block` consecutive t, tile rows
// (blocks of s) by decreasing s and, within one, tiles by increasing t. A row's value at each m is
// the minimum of its candidates, each computed as add + x + y in float, whatever the order they
// come in, so the order is free: it is chosen so that each row a tile reads serves many rows.
// The candidates of a row (s, t) of tile (S, T), S above T, are
//   * the splits s2 whose rows (s2, t) and (s, s2 - 1) both lie in finished tiles (s2 from the
//     first s of the next tile row to the first t of T): applied `split_block` values of s2 at a
//     time to the whole tile (S, T), as a min-plus product, each row read there serving `block`
//     rows while the rows of one pass (2 x block x split_block) stay in the L2 cache. Each row
//     still gets these splits by increasing s2, whatever split_block is, so it changes no count;
//   * the others (F_all^s, the splits with a row in tile (S, T) itself), applied row by row
//     afterwards, by increasing t then decreasing s, as their rows are then filled.
// A diagonal tile (S = T) only has the second kind.
class TiledFill {
 public:
  TiledFill(const ChainArrays<int32_t>& c, const PersistentBounds<int32_t>& bounds,
            const Saturation& saturation, PersistentFamily family, int block, int split_block,
            TriangleTable& table)
      : c_(c),
        bounds_(bounds),
        saturation_(saturation),
        family_(family),
        split_block_(split_block),
        table_(table),
        forward_(static_cast<size_t>(block) * (c.n + 2)) {}

  // Sets the tile row of s in [s_lo, s_hi]: the time of F_ck^s F_∅.. up to a^{s2-1} of each s.
  void start_tile_row(int s_lo, int s_hi) {
    s_lo_ = s_lo;
    for (int s = s_lo; s <= s_hi; ++s) {
      Value* row = forward_row(s);
      double forward = 0;  // summed by increasing s2, as the split loop always did
      for (int s2 = s + 1; s2 <= c_.n; ++s2) {
        forward += c_.uf[s2 - 1];
        row[s2] = static_cast<Value>(forward);
      }
    }
  }

  // Tile rows s in [s_lo, s_hi] (the current tile row), columns t in [t_lo, t_hi].
  void fill_tile(int s_lo, int s_hi, int t_lo, int t_hi) {
    for (int t = t_lo; t <= t_hi; ++t)
      for (int s = std::min(s_hi, t); s >= s_lo; --s)
        std::fill(table_.row(s, t), table_.row(s, t) + table_.width(), kInf);
    if (s_hi < t_lo) {  // finished tiles hold both rows of the splits s2 in [s_hi + 1, t_lo]
      for (int k_lo = s_hi + 1; k_lo <= t_lo; k_lo += split_block_) {
        const int k_hi = std::min(t_lo, k_lo + split_block_ - 1);
        for (int t = t_lo; t <= t_hi; ++t)
          for (int s = s_hi; s >= s_lo; --s) relax_splits(s, t, k_lo, k_hi);
      }
    }
    for (int t = t_lo; t <= t_hi; ++t)
      for (int s = std::min(s_hi, t); s >= s_lo; --s) {
        if (s == t) {
          fill_single(s);
        } else {
          relax_forward_all(s, t);
          // Splits with row (s2, t) in this tile, then those with row (s, s2 - 1) in it.
          relax_splits(s, t, s + 1, std::min(s_hi, t));
          relax_splits(s, t, std::max(s_hi, t_lo) + 1, t);
        }
        finish_row(s, t);
      }
  }

 private:
  Value* forward_row(int s) { return forward_.data() + (s - s_lo_) * (c_.n + 2); }

  void fill_single(int s) {
    Value* out = table_.row(s, s);
    const int64_t width = saturation_.memory(s, s);  // m >= width is filled by finish_row
    const int64_t lo = bounds_.all(s, s);
    std::fill(out + std::min(lo, width), out + width, static_cast<Value>(c_.uf[s] + c_.ub[s]));
    for (int k = 1; k < c_.options(s); ++k) {  // rk-Rotor: the cheapest option that fits
      const StageOption<int32_t> o = c_.option(s, k);
      const auto time = static_cast<Value>(o.uf + o.ub);
      for (int64_t m = forward_all_memory(c_, o, s, s); m < width; ++m)
        out[m] = std::min(out[m], time);
    }
  }

  // F_all^s, C(s+1, t, m - ω_ā^s), B^s, with each option of stage s (Rotor: only option 0).
  void relax_forward_all(int s, int t) {
    if (family_ != PersistentFamily::kRotor) return;
    Value* out = table_.row(s, t);
    const int64_t width = saturation_.memory(s, t);
    for (int k = 0; k < c_.options(s); ++k) {
      const StageOption<int32_t> o = c_.option(s, k);
      const int64_t lo = std::max<int64_t>(forward_all_memory(c_, o, s, t),
                                           table_.summary(s + 1, t).first + o.abar);
      if (lo < width) {
        relax1(out + lo, table_.row(s + 1, t) + lo - o.abar, static_cast<Value>(o.uf + o.ub),
               width - lo);
        table_.relaxed += width - lo;
      }
    }
  }

  // F_ck^s F_∅.. up to a^{s2-1}, C(s2, t, m - ω_a^{s2-1}), C(s, s2-1, m) for s2 in [k_lo, k_hi].
  void relax_splits(int s, int t, int k_lo, int k_hi) {
    Value* out = table_.row(s, t);
    const int64_t width = saturation_.memory(s, t);  // m >= width is filled by finish_row
    const int64_t lo_none = bounds_.none(s, t);
    const RowSummary* column = table_.column(t);  // rows (s2, t)
    const Value* forward = forward_row(s);
    int64_t hint = -1;  // where the previous candidate stopped
    for (int s2 = k_lo; s2 <= k_hi; ++s2) {
      const int32_t w = c_.a[s2 - 1];
      const RowSummary x = column[s2 - 1], y = table_.summary(s, s2 - 1);
      const int64_t lo = std::max<int64_t>({lo_none, int64_t{x.first} + w, y.first});
      if (lo >= width) continue;
      // Rows are non-increasing, so the candidate is never below this; skip entries already at it.
      const Value add = forward[s2];
      const Value least = add + x.last + y.last;
      const int64_t hi = first_at_most_near(out, lo, width, least, hint);
      hint = hi;
      if (lo < hi) {
        relax2(out + lo, table_.row(s2, t) + lo - w, table_.row(s, s2 - 1) + lo, add, hi - lo);
        table_.relaxed += hi - lo;
      }
    }
  }

  void finish_row(int s, int t) {
    const int64_t width = saturation_.memory(s, t);
    if (width < table_.width())
      std::fill(table_.row(s, t) + width, table_.row(s, t) + table_.width(),
                static_cast<Value>(saturation_.makespan(s, t)));
    table_.summarise(s, t);
  }

  const ChainArrays<int32_t>& c_;
  const PersistentBounds<int32_t>& bounds_;
  const Saturation& saturation_;
  PersistentFamily family_;
  int split_block_;
  TriangleTable& table_;
  int s_lo_ = 1;
  std::vector<Value> forward_;  // forward_row(s)[s2] for s in the current tile row
};

// Algorithm 4: the sequence of the optimum C(s, t, m), choosing as TiledFill did.
// `options` gets the option of each op (0 but for the F_all and B of an extra option).
struct Rebuilt {
  ChainSequence& ops;
  std::vector<int32_t>& options;
  void push(ChainOpKind kind, int s, int option = 0) {
    ops.push_back({kind, s});
    options.push_back(option);
  }
};

void rebuild(const ChainArrays<int32_t>& c, const PersistentBounds<int32_t>& bounds,
             PersistentFamily family, const TriangleTable& table, int s, int t, int64_t m,
             Rebuilt& out) {
  if (s == t) {
    int best_option = 0;  // the first cheapest option that fits, as TiledFill chose
    Value best_time = kInf;
    for (int k = 0; k < c.options(s); ++k) {
      const StageOption<int32_t> o = c.option(s, k);
      const auto time = static_cast<Value>(o.uf + o.ub);
      if (m >= forward_all_memory(c, o, s, s) && time < best_time)
        best_time = time, best_option = k;
    }
    out.push(ChainOpKind::kForwardAll, s, best_option);
    out.push(ChainOpKind::kBackward, s, best_option);
    return;
  }
  double best = kInfinity;
  int best_split = 0;  // 0: F_all^s; s2 > s: F_ck^s with next checkpoint a^{s2-1}
  int best_option = 0;
  // Candidates are evaluated as TiledFill did, in float, and the first smallest is kept.
  if (family == PersistentFamily::kRotor) {
    for (int k = 0; k < c.options(s); ++k) {
      const StageOption<int32_t> o = c.option(s, k);
      if (m < forward_all_memory(c, o, s, t) || m < o.abar) continue;
      const Value v = static_cast<Value>(o.uf + o.ub) + table.row(s + 1, t)[m - o.abar];
      if (v < best) best = v, best_option = k;
    }
  }
  if (m >= bounds.none(s, t)) {
    double forward = 0;
    for (int s2 = s + 1; s2 <= t; ++s2) {
      forward += c.uf[s2 - 1];
      if (m < c.a[s2 - 1]) continue;
      const Value v =
          static_cast<Value>(forward) + table.row(s2, t)[m - c.a[s2 - 1]] + table.row(s, s2 - 1)[m];
      if (v < best) {
        best = v;
        best_split = s2;
      }
    }
  }
  REMAT_CHECK(best < kInfinity, fmt::format("persistent DP: no choice for C({}, {}, {})", s, t, m));
  if (best_split == 0) {
    const StageOption<int32_t> o = c.option(s, best_option);
    out.push(ChainOpKind::kForwardAll, s, best_option);
    rebuild(c, bounds, family, table, s + 1, t, m - o.abar, out);
    out.push(ChainOpKind::kBackward, s, best_option);
    return;
  }
  out.push(ChainOpKind::kForwardCheckpoint, s);
  for (int j = s + 1; j < best_split; ++j) out.push(ChainOpKind::kForwardNoSave, j);
  rebuild(c, bounds, family, table, best_split, t, m - c.a[best_split - 1], out);
  rebuild(c, bounds, family, table, s, best_split - 1, m, out);
}

// Rows of a tile side. A tile's splits from finished tiles read rows from all over a table far
// larger than the caches, and each row read serves a tile side of rows: with sides of 16 to 32 the
// table is read fewer times, which gains more than a tile that stays in the L2 cache (sides of 8)
// saves; bench/rotor_bench's persistent rows measure the side.
// The work count (entries relaxed) depends on it, so it is fixed: the work limit stops at the same
// point everywhere.
constexpr int kTile = 24;
// Values of s2 a pass of a tile's splits from finished tiles takes (TiledFill; no effect on the
// work count).
constexpr int kSplitBlock = 8;

}  // namespace

DpOutcome persistent_dp(const Discretisation& d, PersistentFamily family,
                        const DpControl& control) {
  const ChainArrays<int32_t>& c = d.chain;
  DpOutcome outcome;
  const int64_t top_m = static_cast<int64_t>(d.budget_bins) - c.a[0];
  if (top_m < 0) return outcome;
  const PersistentBounds<int32_t> bounds(c);
  TriangleTable table(c.n, static_cast<int32_t>(top_m));
  const Saturation saturation(c, family, table.width());
  TiledFill fill(c, bounds, saturation, family, kTile, kSplitBlock, table);
  for (int s_hi = c.n; s_hi >= 1; s_hi -= kTile) {
    const int s_lo = std::max(1, s_hi - kTile + 1);
    fill.start_tile_row(s_lo, s_hi);
    for (int t_lo = s_lo; t_lo <= c.n; t_lo += kTile) {
      if (stop_between_rows(control, table.relaxed, outcome)) return outcome;  // between tiles
      fill.fill_tile(s_lo, s_hi, t_lo, std::min(c.n, t_lo + kTile - 1));
    }
    if (control.on_progress) {
      const double done =
          1 - static_cast<double>(s_lo - 1) * s_lo / (static_cast<double>(c.n) * (c.n + 1));
      control.on_progress({.stage = "dp", .fraction = done});
    }
  }
  outcome.rows = table.rows();
  outcome.relaxed = table.relaxed;
  outcome.makespan = table.row(1, c.n)[top_m];
  if (outcome.makespan == kInfinity) return outcome;  // float inf converts to double inf
  ChainSequence ops;
  Rebuilt rebuilt{ops, outcome.options};
  rebuild(c, bounds, family, table, 1, c.n, top_m, rebuilt);
  outcome.ops = std::move(ops);
  return outcome;
}

MinMemory persistent_min_memory(const ChainArrays<int64_t>& c, PersistentFamily family) {
  // P(s, t): the least m with C(s, t, m) finite, in bytes; choice: 0 for F_all^s, else s2.
  const int n = c.n;
  const PersistentBounds<int64_t> bounds(c);
  auto at = [n](int s, int t) { return static_cast<size_t>(s * (n + 1) + t); };
  std::vector<int64_t> need(static_cast<size_t>((n + 1) * (n + 1)), kNoBytes);
  std::vector<int> choice(need.size(), -1);
  for (int span = 0; span < n; ++span)
    for (int s = 1; s + span <= n; ++s) {
      const int t = s + span;
      int64_t best = kNoBytes;
      int best_choice = 0;  // 0: F_all^s with option 0; -k: with option k; s2 > s: F_ck^s
      if (s == t) {
        for (int k = 0; k < c.options(s); ++k) {
          const int64_t v = forward_all_memory(c, c.option(s, k), s, s);
          if (v < best) best = v, best_choice = -k;
        }
      } else {
        if (family == PersistentFamily::kRotor)
          for (int k = 0; k < c.options(s); ++k) {
            const StageOption<int64_t> o = c.option(s, k);
            const int64_t v = std::max(forward_all_memory(c, o, s, t), need[at(s + 1, t)] + o.abar);
            if (v < best) best = v, best_choice = -k;
          }
        for (int s2 = s + 1; s2 <= t; ++s2) {
          const int64_t v =
              std::max({bounds.none(s, t), need[at(s2, t)] + c.a[s2 - 1], need[at(s, s2 - 1)]});
          if (v < best) {
            best = v;
            best_choice = s2;
          }
        }
      }
      need[at(s, t)] = std::min(best, kNoBytes);
      choice[at(s, t)] = best_choice;
    }
  MinMemory result;
  result.bytes = need[at(1, n)] + c.a[0];
  // Rebuild with an explicit stack of (s, t, phase) so deep chains need no deep recursion.
  struct Frame {
    int s, t;
    bool close;      // emit B^s (after the F_all^s branch's sub-chain)
    int option = 0;  // of the F_all^s that `close` ends
  };
  auto push = [&](ChainOpKind kind, int s, int option = 0) {
    result.ops.push_back({kind, s});
    result.options.push_back(option);
  };
  std::vector<Frame> stack = {{1, n, false}};
  while (!stack.empty()) {
    const Frame f = stack.back();
    stack.pop_back();
    if (f.close) {
      push(ChainOpKind::kBackward, f.s, f.option);
      continue;
    }
    const int s2 = choice[at(f.s, f.t)];
    if (f.s == f.t) {
      push(ChainOpKind::kForwardAll, f.s, -s2);
      push(ChainOpKind::kBackward, f.s, -s2);
      continue;
    }
    if (s2 <= 0) {
      push(ChainOpKind::kForwardAll, f.s, -s2);
      stack.push_back({f.s, f.t, true, -s2});
      stack.push_back({f.s + 1, f.t, false});
      continue;
    }
    push(ChainOpKind::kForwardCheckpoint, f.s);
    for (int j = f.s + 1; j < s2; ++j) push(ChainOpKind::kForwardNoSave, j);
    stack.push_back({f.s, s2 - 1, false});  // runs second
    stack.push_back({s2, f.t, false});
  }
  return result;
}

}  // namespace remat::rotor
