// timing.h — what the bench programs share: the median wall time of repeated work (medians
// resist the noise of a shared machine better than means).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace remat::bench {

inline double median_seconds(int repetitions, const std::function<void()>& work) {
  std::vector<double> times;
  for (int i = 0; i < repetitions; ++i) {
    const auto start = std::chrono::steady_clock::now();
    work();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace remat::bench
