#include "remat/toolkit.h"

#include <algorithm>
#include <cmath>

namespace remat {

Deadline::Deadline(double seconds)
    : start_(std::chrono::steady_clock::now()), limit_s_(std::min(seconds, 1e9)) {
  const double capped = limit_s_;
  end_ = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(capped));
}

double Deadline::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

int64_t work_ops(double work_units, double ops_per_unit) {
  constexpr double kMost = 0x1p62;
  const double ops = std::ceil(work_units * ops_per_unit);
  if (!(ops < kMost)) return static_cast<int64_t>(kMost);
  return std::max<int64_t>(1, static_cast<int64_t>(ops));
}

double Limits::seconds_left() const {
  return std::max(0.0, deadline_.limit_s() - deadline_.elapsed_s());
}

StopReason Limits::reason() const {
  if (interrupt_requested()) return StopReason::kInterrupted;
  if (deadline_.expired()) return StopReason::kTimeLimit;
  if (out_of_work()) return StopReason::kWorkLimit;
  return StopReason::kConverged;
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
