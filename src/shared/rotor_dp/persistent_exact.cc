// The persistent DP of Theorem 4.8 in exact bytes, for bins=exact: each C(s, t, ·) is a
// non-increasing step function of m kept as its breakpoints (the Pareto front of memory against
// makespan of the sub-chain), so there is no discretisation and no table over m. Fronts stay
// small on real chains; a front only keeps points up to the top-level budget.
#include <fmt/format.h>

#include <algorithm>

#include "dp.h"
#include "remat/error.h"

namespace remat::rotor {
namespace {

struct Point {
  int64_t m;  // from this memory on ...
  double v;   // ... this makespan is reachable
};
using Front = std::vector<Point>;  // m increasing, v decreasing

double value_at(const Front& f, int64_t m) {
  auto it =
      std::upper_bound(f.begin(), f.end(), m, [](int64_t x, const Point& p) { return x < p.m; });
  return it == f.begin() ? kInfinity : std::prev(it)->v;
}

// Keeps the points no other point dominates (smaller-or-equal m with smaller-or-equal v).
Front pareto(std::vector<Point> points) {
  std::stable_sort(points.begin(), points.end(), [](const Point& x, const Point& y) {
    return x.m < y.m || (x.m == y.m && x.v < y.v);
  });
  Front front;
  for (const Point& p : points)
    if (front.empty() || p.v < front.back().v) front.push_back(p);
  return front;
}

class ExactPersistent {
 public:
  ExactPersistent(const ChainArrays<int64_t>& c, PersistentFamily family, int64_t top)
      : c_(c), family_(family), top_(top), fronts_(static_cast<size_t>((c.n + 2) * (c.n + 2))) {}

  int64_t none(int s, int t) const { return forward_none_memory(c_, s, t); }
  int64_t all(int s, int t) const { return forward_all_memory(c_, s, t); }
  const Front& front(int s, int t) const { return fronts_[index(s, t)]; }

  // False when the control's deadline or work limit (front points times candidate splits) ends
  // it first.
  bool fill(const DpControl& control, int64_t& relaxed) {
    for (int s = c_.n; s >= 1; --s) {
      if (control.deadline != nullptr && control.deadline->expired()) return false;
      if (relaxed >= control.max_relaxed) return false;
      for (int t = s; t <= c_.n; ++t) {
        fronts_[index(s, t)] = compute(s, t);
        relaxed += static_cast<int64_t>(fronts_[index(s, t)].size() + 1) * (t - s + 1);
      }
    }
    return true;
  }

  // Candidates of C(s, t, m) in the order of the binned DP: F_all^s first, then F_ck^s with the
  // next checkpoint a^{s2-1}, s2 = s+1..t. Returns (value, s2) with s2 = 0 for F_all^s.
  std::pair<double, int> best_choice(int s, int t, int64_t m) const {
    double best = kInfinity;
    int split = 0;
    if (family_ == PersistentFamily::kRotor && m >= all(s, t))
      best = (c_.uf[s] + c_.ub[s]) + value_at(front(s + 1, t), m - c_.abar[s]);
    if (m >= none(s, t)) {
      double forward = 0;
      for (int s2 = s + 1; s2 <= t; ++s2) {
        forward += c_.uf[s2 - 1];
        const double v =
            forward + value_at(front(s2, t), m - c_.a[s2 - 1]) + value_at(front(s, s2 - 1), m);
        if (v < best) best = v, split = s2;
      }
    }
    return {best, split};
  }

 private:
  size_t index(int s, int t) const { return static_cast<size_t>(s * (c_.n + 2) + t); }

  Front compute(int s, int t) const {
    std::vector<Point> points;
    auto add = [&](int64_t m, double v) {
      if (m <= top_ && v < kInfinity) points.push_back({m, v});
    };
    if (s == t) {
      add(all(s, s), c_.uf[s] + c_.ub[s]);
      return pareto(std::move(points));
    }
    if (family_ == PersistentFamily::kRotor) {
      const int64_t floor = all(s, t);
      for (const Point& p : front(s + 1, t))
        add(std::max(floor, p.m + c_.abar[s]), (c_.uf[s] + c_.ub[s]) + p.v);
    }
    const int64_t floor = none(s, t);
    double forward = 0;
    for (int s2 = s + 1; s2 <= t; ++s2) {
      forward += c_.uf[s2 - 1];
      const Front& x = front(s2, t);  // read at m - a^{s2-1}
      const Front& y = front(s, s2 - 1);
      const int64_t w = c_.a[s2 - 1];
      // The sum changes only at breakpoints of x (shifted) or y.
      size_t i = 0, j = 0;
      while (i < x.size() || j < y.size()) {
        const int64_t mx = i < x.size() ? x[i].m + w : INT64_MAX;
        const int64_t my = j < y.size() ? y[j].m : INT64_MAX;
        const int64_t m = std::min(mx, my);
        if (mx == m) ++i;
        if (my == m) ++j;
        if (i == 0 || j == 0) continue;  // one side still infinite
        add(std::max(floor, m), forward + x[i - 1].v + y[j - 1].v);
      }
    }
    return pareto(std::move(points));
  }

  const ChainArrays<int64_t>& c_;
  PersistentFamily family_;
  int64_t top_;
  std::vector<Front> fronts_;
};

void rebuild(const ExactPersistent& dp, int s, int t, int64_t m, const ChainArrays<int64_t>& c,
             ChainSequence& out) {
  if (s == t) {
    out.push_back({ChainOpKind::kForwardAll, s});
    out.push_back({ChainOpKind::kBackward, s});
    return;
  }
  const auto [value, split] = dp.best_choice(s, t, m);
  REMAT_CHECK(value < kInfinity,
              fmt::format("exact persistent DP: no choice for C({}, {}, {})", s, t, m));
  if (split == 0) {
    out.push_back({ChainOpKind::kForwardAll, s});
    rebuild(dp, s + 1, t, m - c.abar[s], c, out);
    out.push_back({ChainOpKind::kBackward, s});
    return;
  }
  out.push_back({ChainOpKind::kForwardCheckpoint, s});
  for (int j = s + 1; j < split; ++j) out.push_back({ChainOpKind::kForwardNoSave, j});
  rebuild(dp, split, t, m - c.a[split - 1], c, out);
  rebuild(dp, s, split - 1, m, c, out);
}

}  // namespace

DpOutcome persistent_dp_exact(const ChainArrays<int64_t>& c, int64_t budget_bytes,
                              PersistentFamily family, const DpControl& control) {
  DpOutcome outcome;
  const int64_t top = budget_bytes - c.a[0];
  if (top < 0) return outcome;
  ExactPersistent dp(c, family, top);
  if (!dp.fill(control, outcome.relaxed)) {
    const bool clock = control.deadline != nullptr && control.deadline->expired();
    outcome.timed_out = clock;
    outcome.work_limit_hit = !clock;
    return outcome;
  }
  outcome.rows = int64_t{c.n} * (c.n + 1) / 2;
  outcome.makespan = value_at(dp.front(1, c.n), top);
  if (outcome.makespan == kInfinity) return outcome;
  ChainSequence ops;
  rebuild(dp, 1, c.n, top, c, ops);
  outcome.ops = std::move(ops);
  return outcome;
}

}  // namespace remat::rotor
