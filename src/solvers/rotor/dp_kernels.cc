// Compiled with -O3 (see CMakeLists.txt) so that GCC vectorises these loops; `v < o ? v : o`
// maps to minpd exactly (no -ffast-math needed: infinities order correctly and no NaN can occur,
// since every term is a sum of non-negative times or +inf).
#include "dp_kernels.h"

// AVX2 and baseline versions chosen at load time (GNU ifunc); elsewhere the compiler's default.
#if defined(__x86_64__) && defined(__GLIBC__)
#define REMAT_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define REMAT_VECTOR_CLONES
#endif

namespace remat::rotor {

REMAT_VECTOR_CLONES void relax2(double* __restrict out, const double* __restrict x,
                                const double* __restrict y, double add, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const double v = add + x[i] + y[i];
    out[i] = v < out[i] ? v : out[i];
  }
}

REMAT_VECTOR_CLONES void relax1(double* __restrict out, const double* __restrict x, double add,
                                int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const double v = add + x[i];
    out[i] = v < out[i] ? v : out[i];
  }
}

int64_t first_at_most(const double* row, int64_t lo, int64_t hi, double threshold) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (row[mid] <= threshold)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

int64_t first_finite(const double* row, int64_t count) {
  int64_t i = 0;
  while (i < count && row[i] == kInfinity) ++i;
  return i;
}

REMAT_VECTOR_CLONES void relax2(float* __restrict out, const float* __restrict x,
                                const float* __restrict y, float add, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float v = add + x[i] + y[i];
    out[i] = v < out[i] ? v : out[i];
  }
}

REMAT_VECTOR_CLONES void relax1(float* __restrict out, const float* __restrict x, float add,
                                int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float v = add + x[i];
    out[i] = v < out[i] ? v : out[i];
  }
}

int64_t first_at_most(const float* row, int64_t lo, int64_t hi, float threshold) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (row[mid] <= threshold)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

int64_t first_finite(const float* row, int64_t count) {
  int64_t i = 0;
  while (i < count && row[i] == kInfinityF) ++i;
  return i;
}

}  // namespace remat::rotor
