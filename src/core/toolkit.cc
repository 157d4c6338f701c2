#include "remat/toolkit.h"

#include <algorithm>

namespace remat {

Deadline::Deadline(double seconds) : start_(std::chrono::steady_clock::now()) {
  const double capped = std::min(seconds, 1e9);
  end_ = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(capped));
}

double Deadline::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

uint64_t derive_seed(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool better_plan(PlanScore a, PlanScore b, int64_t budget_bytes) {
  const bool a_fits = a.peak_bytes <= budget_bytes, b_fits = b.peak_bytes <= budget_bytes;
  if (a_fits != b_fits) return a_fits;
  if (a_fits) return a.cost < b.cost || (a.cost == b.cost && a.peak_bytes < b.peak_bytes);
  return a.peak_bytes < b.peak_bytes || (a.peak_bytes == b.peak_bytes && a.cost < b.cost);
}

}  // namespace remat
