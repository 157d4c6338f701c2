// Algorithm 1 / 2 of the Rotor paper (Theorem 4.7): C(s, t, l, m) is the least makespan to run
// the backward steps B^l .. B^t when a^{s-1} (the floating activation, not counted in m) and δ^l
// are stored, within memory m, ending with only δ^{t-1} added to what was there before.
//
// The recurrence is Theorem 4.7's, factored so that the choice of r (where the floating activation
// moves) is not enumerated: the paper's C_ck(s, t, r, s', t', l, m) starts with F_∅^s..F_∅^{r-1},
// which is r - s applications of the "move" option below followed by C_ck at r. Each sub-problem
// is thus O(L^2) decompositions instead of O(L^3), O(S L^5) in all instead of O(S L^6). The
// options, tried in this order (ties keep the first):
//   all   (s = t)   F_all^s, C(s+1, s+1, l, m - ω_ā^s), B^s         (C(s,s,s): F_all^s B^s)
//   move  (s < t)   F_∅^s, C(s+1, t, l, m + ω_a^{s-1} - ω_a^s)      a^{s-1} is freed
//   ck    (t < l)   F_ck^s F_∅^{s+1..s'-1}, C(s', t', l, m - ω_a^{s'-1}), C(s, t, t'-1, m)
//                   for s < s' <= t', t < t' <= l
// The move also covers what the printed recurrence leaves out (C(s, t, t) with s < t, and F_all
// right after a move), and memory conditions are checked per operation actually run rather than
// with the paper's m∅ over all of s..l: on every chain tested it matches brute force over all
// sequences (tests/rotor/brute_force_test.cc).
#include <fmt/format.h>

#include <algorithm>

#include "dp.h"
#include "remat/error.h"

namespace remat::rotor {
namespace {

// Memory conditions of the options, in the chain's size type (a^{s-1} not counted).
template <class Size>
struct WeakBounds {
  const ChainArrays<Size>& c;
  // F_all^s with δ^l stored, then B^s.
  Size all(int s, int l) const { return forward_all_memory(c, s, l); }
  // F_∅^s or F_ck^s with δ^l stored.
  Size first_forward(int s, int l) const { return c.delta[l] + c.a[s] + c.of[s]; }
  // F_∅^j (j > s) after F_ck^s, with δ^l stored.
  Size later_forward(int j, int l) const { return c.delta[l] + c.a[j - 1] + c.a[j] + c.of[j]; }
};

// Cells (s, t, l), 1 <= s <= t <= l <= n.
class CellIndex {
 public:
  explicit CellIndex(int n) : n_(n) {
    base_.assign(static_cast<size_t>(n + 2), 0);
    for (int s = 1; s <= n; ++s) {
      const int64_t k = n - s + 1;
      base_[s + 1] = base_[s] + k * (k + 1) / 2;
    }
  }
  int64_t operator()(int s, int t, int l) const {
    const int64_t j = l - s;
    return base_[s] + j * (j + 1) / 2 + (t - s);
  }
  int64_t count() const { return base_[n_ + 1]; }

 private:
  int n_;
  std::vector<int64_t> base_;
};

class CubeTable {
 public:
  CubeTable(int n, int32_t max_m) : index_(n), width_(max_m + 1) {
    values_.assign(static_cast<size_t>(index_.count() * width_), kInfinity);
    first_.assign(static_cast<size_t>(index_.count()), width_);
  }
  double* row(int s, int t, int l) { return values_.data() + index_(s, t, l) * width_; }
  const double* row(int s, int t, int l) const { return values_.data() + index_(s, t, l) * width_; }
  int64_t& first(int s, int t, int l) { return first_[static_cast<size_t>(index_(s, t, l))]; }
  int64_t first(int s, int t, int l) const { return first_[static_cast<size_t>(index_(s, t, l))]; }
  int64_t width() const { return width_; }
  int64_t rows() const { return index_.count(); }
  int64_t relaxed = 0;  // entries relaxed, the DP's work

 private:
  CellIndex index_;
  int64_t width_;
  std::vector<double> values_;
  std::vector<int64_t> first_;
};

void fill_all(const ChainArrays<int32_t>& c, const WeakBounds<int32_t>& b, int s, int l,
              CubeTable& table, double* out) {
  const int64_t width = table.width();
  if (s == l) {
    std::fill(out + std::min<int64_t>(b.all(s, s), width), out + width, c.uf[s] + c.ub[s]);
    return;
  }
  const int64_t lo = std::max<int64_t>(b.all(s, l), table.first(s + 1, s + 1, l) + c.abar[s]);
  if (lo < width) {
    relax1(out + lo, table.row(s + 1, s + 1, l) + lo - c.abar[s], c.uf[s] + c.ub[s], width - lo);
    table.relaxed += width - lo;
  }
}

void fill_move(const ChainArrays<int32_t>& c, const WeakBounds<int32_t>& b, int s, int t, int l,
               CubeTable& table, double* out) {
  const int64_t width = table.width();
  const int64_t shift = static_cast<int64_t>(c.a[s]) - c.a[s - 1];  // sub-problem at m - shift
  const double* sub = table.row(s + 1, t, l);
  const int64_t lo =
      std::max<int64_t>({b.first_forward(s, l), table.first(s + 1, t, l) + shift, 0});
  // m - shift beyond the table (shift < 0) happens only in cells no top-level run reaches; they
  // get the sub-problem's value at the largest m, an upper bound.
  const int64_t direct_end = std::min(width, width + shift);
  if (lo < direct_end) relax1(out + lo, sub + lo - shift, c.uf[s], direct_end - lo);
  for (int64_t m = std::max(lo, direct_end); m < width; ++m)
    out[m] = std::min(out[m], c.uf[s] + sub[width - 1]);
  table.relaxed += std::max<int64_t>(0, width - lo);
}

void fill_checkpoint(const ChainArrays<int32_t>& c, const WeakBounds<int32_t>& b, int s, int t,
                     int l, CubeTable& table, double* out) {
  const int64_t width = table.width();
  int64_t forward_memory = b.first_forward(s, l);
  double forward = 0;
  for (int s2 = s + 1; s2 <= l; ++s2) {
    if (s2 > s + 1) forward_memory = std::max<int64_t>(forward_memory, b.later_forward(s2 - 1, l));
    forward += c.uf[s2 - 1];
    if (forward_memory >= width) break;  // grows with s2
    const int32_t w = c.a[s2 - 1];
    for (int t2 = std::max(s2, t + 1); t2 <= l; ++t2) {
      const int64_t lo =
          std::max({forward_memory, table.first(s2, t2, l) + w, table.first(s, t, t2 - 1)});
      if (lo >= width) continue;
      // Rows are non-increasing: the candidate is never below `least`, so it can only improve
      // the entries before the first one already at or below it.
      const double* x = table.row(s2, t2, l);
      const double* y = table.row(s, t, t2 - 1);
      const double least = forward + x[width - 1] + y[width - 1];
      const int64_t hi = first_at_most(out, lo, width, least);
      if (lo < hi) {
        relax2(out + lo, x + lo - w, y + lo, forward, hi - lo);
        table.relaxed += hi - lo;
      }
    }
  }
}

void fill_cell(const ChainArrays<int32_t>& c, const WeakBounds<int32_t>& b, int s, int t, int l,
               CubeTable& table) {
  double* out = table.row(s, t, l);
  if (s == t) fill_all(c, b, s, l, table, out);
  if (s < t) fill_move(c, b, s, t, l, table, out);
  if (t < l) fill_checkpoint(c, b, s, t, l, table, out);
  table.first(s, t, l) = first_finite(out, table.width());
}

struct Rebuilder {
  const ChainArrays<int32_t>& c;
  const WeakBounds<int32_t>& b;
  const CubeTable& table;
  ChainSequence& out;

  void run(int s, int t, int l, int64_t m) {
    const int64_t width = table.width();
    enum class Choice { kNone, kAll, kMove, kCheckpoint } choice = Choice::kNone;
    double best = kInfinity;
    int best_s2 = 0, best_t2 = 0;
    if (s == t && m >= b.all(s, l)) {
      if (s == l) {
        best = c.uf[s] + c.ub[s];
        choice = Choice::kAll;
      } else if (m >= c.abar[s]) {
        best = (c.uf[s] + c.ub[s]) + table.row(s + 1, s + 1, l)[m - c.abar[s]];
        choice = best < kInfinity ? Choice::kAll : Choice::kNone;
      }
    }
    const int64_t shift = static_cast<int64_t>(c.a[s]) - c.a[s - 1];
    if (s < t && m >= b.first_forward(s, l) && m - shift >= 0) {
      const double v = c.uf[s] + table.row(s + 1, t, l)[std::min(m - shift, width - 1)];
      if (v < best) {
        best = v;
        choice = Choice::kMove;
      }
    }
    if (t < l) {
      int64_t forward_memory = b.first_forward(s, l);
      double forward = 0;
      for (int s2 = s + 1; s2 <= l; ++s2) {
        if (s2 > s + 1)
          forward_memory = std::max<int64_t>(forward_memory, b.later_forward(s2 - 1, l));
        forward += c.uf[s2 - 1];
        if (m < forward_memory || m < c.a[s2 - 1]) continue;
        for (int t2 = std::max(s2, t + 1); t2 <= l; ++t2) {
          const double v =
              forward + table.row(s2, t2, l)[m - c.a[s2 - 1]] + table.row(s, t, t2 - 1)[m];
          if (v < best) {
            best = v;
            choice = Choice::kCheckpoint;
            best_s2 = s2;
            best_t2 = t2;
          }
        }
      }
    }
    REMAT_CHECK(choice != Choice::kNone,
                fmt::format("weak DP: no choice for C({}, {}, {}, {})", s, t, l, m));
    switch (choice) {
      case Choice::kAll:
        out.push_back({ChainOpKind::kForwardAll, s});
        if (s < l) run(s + 1, s + 1, l, m - c.abar[s]);
        out.push_back({ChainOpKind::kBackward, s});
        return;
      case Choice::kMove:
        out.push_back({ChainOpKind::kForwardNoSave, s});
        run(s + 1, t, l, std::min(m - shift, width - 1));
        return;
      case Choice::kCheckpoint:
        out.push_back({ChainOpKind::kForwardCheckpoint, s});
        for (int j = s + 1; j < best_s2; ++j) out.push_back({ChainOpKind::kForwardNoSave, j});
        run(best_s2, best_t2, l, m - c.a[best_s2 - 1]);
        run(s, t, best_t2 - 1, m);
        return;
      case Choice::kNone:
        return;
    }
  }
};

}  // namespace

int64_t weak_dp_entries(int n, int64_t budget_bins) {
  return CellIndex(n).count() * (budget_bins + 1);
}

DpOutcome weak_dp(const Discretisation& d, const DpControl& control) {
  const ChainArrays<int32_t>& c = d.chain;
  DpOutcome outcome;
  // The floating activation may be freed, so sub-problems can have up to the whole budget.
  const int64_t top_m = static_cast<int64_t>(d.budget_bins) - c.a[0];
  if (top_m < 0) return outcome;
  const WeakBounds<int32_t> bounds{c};
  CubeTable table(c.n, d.budget_bins);
  const double total = static_cast<double>(c.n) * (c.n + 1) / 2;
  double done = 0;
  for (int span = 0; span < c.n; ++span) {
    for (int s = 1; s + span <= c.n; ++s) {
      if (stop_between_rows(control, table.relaxed, outcome)) return outcome;
      for (int t = s; t <= s + span; ++t) fill_cell(c, bounds, s, t, s + span, table);
      done += 1;
    }
    if (control.on_progress) control.on_progress({.stage = "weak dp", .fraction = done / total});
  }
  outcome.rows = table.rows();
  outcome.relaxed = table.relaxed;
  outcome.makespan = table.row(1, 1, c.n)[top_m];
  if (outcome.makespan == kInfinity) return outcome;
  ChainSequence ops;
  Rebuilder{c, bounds, table, ops}.run(1, 1, c.n, top_m);
  outcome.ops = std::move(ops);
  return outcome;
}

std::optional<MinMemory> weak_min_memory(const ChainArrays<int64_t>& c, const DpControl& control,
                                         int64_t* relaxed) {
  int64_t evaluations = 0;
  const auto count = [&] {
    if (relaxed != nullptr) *relaxed = evaluations;
  };
  // P(s, t, l): the least m with C(s, t, l, m) finite, in bytes, with the same options.
  const int n = c.n;
  const WeakBounds<int64_t> b{c};
  const CellIndex index(n);
  std::vector<int64_t> need(static_cast<size_t>(index.count()), kNoBytes);
  struct Choice {
    int kind = 0;  // 1 all, 2 move, 3 checkpoint
    int s2 = 0, t2 = 0;
  };
  std::vector<Choice> choice(need.size());
  auto at = [&](int s, int t, int l) { return static_cast<size_t>(index(s, t, l)); };
  for (int span = 0; span < n; ++span)
    for (int s = 1; s + span <= n; ++s) {
      count();
      if (control.deadline != nullptr && control.deadline->expired()) return std::nullopt;
      if (evaluations >= control.max_relaxed) return std::nullopt;
      const int l = s + span;
      for (int t = s; t <= l; ++t) {
        int64_t best = kNoBytes;
        Choice pick;
        if (s == t) {
          best =
              s == l ? b.all(s, s) : std::max(b.all(s, l), need[at(s + 1, s + 1, l)] + c.abar[s]);
          pick.kind = 1;
        }
        if (s < t) {
          const int64_t v =
              std::max(b.first_forward(s, l), need[at(s + 1, t, l)] + c.a[s] - c.a[s - 1]);
          if (v < best) best = v, pick = {2, 0, 0};
        }
        if (t < l) {
          int64_t forward_memory = b.first_forward(s, l);
          for (int s2 = s + 1; s2 <= l; ++s2) {
            if (s2 > s + 1) forward_memory = std::max(forward_memory, b.later_forward(s2 - 1, l));
            const int first_t2 = std::max(s2, t + 1);
            evaluations += std::max(0, l - first_t2 + 1);
            for (int t2 = first_t2; t2 <= l; ++t2) {
              const int64_t v = std::max(
                  {forward_memory, need[at(s2, t2, l)] + c.a[s2 - 1], need[at(s, t, t2 - 1)]});
              if (v < best) best = v, pick = {3, s2, t2};
            }
          }
        }
        need[at(s, t, l)] = std::min(best, kNoBytes);
        choice[at(s, t, l)] = pick;
      }
    }
  count();
  MinMemory result;
  result.bytes = need[at(1, 1, n)] + c.a[0];
  struct Frame {
    int s, t, l;
    bool close;
  };
  std::vector<Frame> stack = {{1, 1, n, false}};
  while (!stack.empty()) {
    const Frame f = stack.back();
    stack.pop_back();
    if (f.close) {
      result.ops.push_back({ChainOpKind::kBackward, f.s});
      continue;
    }
    const Choice pick = choice[at(f.s, f.t, f.l)];
    REMAT_CHECK(pick.kind != 0, "weak min-memory DP: cell without a choice");
    if (pick.kind == 1) {
      result.ops.push_back({ChainOpKind::kForwardAll, f.s});
      stack.push_back({f.s, f.s, f.l, true});
      if (f.s < f.l) stack.push_back({f.s + 1, f.s + 1, f.l, false});
    } else if (pick.kind == 2) {
      result.ops.push_back({ChainOpKind::kForwardNoSave, f.s});
      stack.push_back({f.s + 1, f.t, f.l, false});
    } else {
      result.ops.push_back({ChainOpKind::kForwardCheckpoint, f.s});
      for (int j = f.s + 1; j < pick.s2; ++j)
        result.ops.push_back({ChainOpKind::kForwardNoSave, j});
      stack.push_back({f.s, f.t, pick.t2 - 1, false});
      stack.push_back({pick.s2, pick.t2, f.l, false});
    }
  }
  return result;
}

}  // namespace remat::rotor
