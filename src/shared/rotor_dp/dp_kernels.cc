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

}  // namespace remat::rotor
