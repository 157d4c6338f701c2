// dp_kernels.h — the inner loops of the Rotor dynamic programs, vectorised over the memory axis.
// A DP row holds the optimal makespan of one sub-chain for every memory m = 0..M; each candidate
// decomposition relaxes a whole row at once (out[m] = min(out[m], add + x[m] + y[m])), which is
// what makes the DPs fast: the memory axis is contiguous, the loops have no branches, and AVX2 is
// used when the CPU has it (function multi-versioning, so the binary still runs everywhere).
#pragma once

#include <algorithm>
#include <cstdint>

namespace remat::rotor {

inline constexpr double kInfinity = __builtin_inf();

// out[i] = min(out[i], add + x[i] + y[i]) for i < count. The three ranges must not overlap.
void relax2(double* __restrict out, const double* __restrict x, const double* __restrict y,
            double add, int64_t count);
// out[i] = min(out[i], add + x[i]) for i < count.
void relax1(double* __restrict out, const double* __restrict x, double add, int64_t count);

// The same in single precision, for the persistent DP's table: half the memory traffic, which is
// what bounds that DP (its candidates differ by whole stage times, far above float rounding).
inline constexpr float kInfinityF = __builtin_inff();
void relax2(float* __restrict out, const float* __restrict x, const float* __restrict y, float add,
            int64_t count);
void relax1(float* __restrict out, const float* __restrict x, float add, int64_t count);
// (The relax loops are overloads, not a template: GCC's function multi-versioning,
// target_clones, does not apply to templates.)

// The first i < count with row[i] finite, or count when none is.
template <class Real>
int64_t first_finite(const Real* row, int64_t count) {
  int64_t i = 0;
  while (i < count && row[i] == static_cast<Real>(kInfinity)) ++i;
  return i;
}

// For a row non-increasing on [lo, hi): the first i in [lo, hi) with row[i] <= threshold, or hi.
// A candidate whose every value is at least `threshold` can only improve the entries before it,
// which is how the DPs skip most of the memory axis for candidates that recompute a lot.
template <class Real>
int64_t first_at_most(const Real* row, int64_t lo, int64_t hi, Real threshold) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (row[mid] <= threshold)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// The same answer, searched from a guess: gallops away from `hint` in steps that double, then
// halves. The persistent DP's consecutive candidates of one row stop near one another, where this
// takes a few probes instead of log2(hi - lo) unpredictable ones.
template <class Real>
int64_t first_at_most_near(const Real* row, int64_t lo, int64_t hi, Real threshold, int64_t hint) {
  if (hint <= lo || hint >= hi) return first_at_most(row, lo, hi, threshold);
  if (row[hint] <= threshold) {  // the answer is in [lo, hint]
    int64_t right = hint, step = 1;
    while (right - step > lo && row[right - step] <= threshold) right -= step, step *= 2;
    return first_at_most(row, std::max(lo, right - step), right, threshold);
  }
  int64_t left = hint + 1, step = 1;  // row[left - 1] > threshold: the answer is in [left, hi]
  while (left + step < hi && row[left + step - 1] > threshold) left += step, step *= 2;
  return first_at_most(row, left, std::min(hi, left + step), threshold);
}

}  // namespace remat::rotor
