// The flat per-value time lists of the annealing state against sorted vectors: random inserts
// and erases on a few values, enough that runs move and the array is packed many times, keep
// every value's productions, uses and first times equal to the reference.
#include "fastsa/time_lists.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "remat/random.h"

namespace remat::fastsa {
namespace {

struct Reference {
  std::vector<int32_t> productions, uses;
};

void expect_same(const ValueTimes& times, const std::vector<Reference>& ref) {
  for (int32_t v = 0; v < static_cast<int32_t>(ref.size()); ++v) {
    const Reference& r = ref[static_cast<size_t>(v)];
    const std::span<const int32_t> p = times.productions(v), u = times.uses(v);
    ASSERT_EQ(std::vector<int32_t>(p.begin(), p.end()), r.productions) << "value " << v;
    ASSERT_EQ(std::vector<int32_t>(u.begin(), u.end()), r.uses) << "value " << v;
    const FirstTimes& first = times.first(v);
    EXPECT_EQ(first.production, r.productions.empty() ? kNoTime : r.productions[0]);
    EXPECT_EQ(first.second_production, r.productions.size() < 2 ? kNoTime : r.productions[1]);
    EXPECT_EQ(first.use, r.uses.empty() ? kNoTime : r.uses[0]);
  }
}

TEST(ValueTimes, StaySortedAndMatchVectorsWhileRunsMoveAndThePoolIsPacked) {
  constexpr int32_t kValues = 7;
  ValueTimes times;
  std::vector<Reference> ref(kValues);
  std::vector<int32_t> produced(kValues, 1), used(kValues, 2);
  times.reset(produced, used);
  int32_t next_time = 0;
  for (int32_t v = 0; v < kValues; ++v) {
    times.push_production(v, next_time);
    ref[static_cast<size_t>(v)].productions.push_back(next_time++);
  }
  for (int32_t v = 0; v < kValues; ++v)
    for (int k = 0; k < 2; ++k) {
      times.push_use(v, next_time);
      ref[static_cast<size_t>(v)].uses.push_back(next_time++);
    }
  expect_same(times, ref);
  Rng rng(7);
  for (int step = 0; step < 20000; ++step) {
    const auto v = static_cast<int32_t>(rng.below(kValues));
    Reference& r = ref[static_cast<size_t>(v)];
    const bool production = rng.below(3) == 0;
    std::vector<int32_t>& list = production ? r.productions : r.uses;
    // Inserts outnumber erases, so the lists grow to hundreds of times each.
    if (!list.empty() && rng.below(5) < 2) {
      const int32_t t = list[static_cast<size_t>(rng.below(list.size()))];
      list.erase(std::lower_bound(list.begin(), list.end(), t));
      production ? times.erase_production(v, t) : times.erase_use(v, t);
    } else {
      const auto t = static_cast<int32_t>(rng.below(1 << 20));
      if (std::binary_search(list.begin(), list.end(), t)) continue;
      const auto at = std::lower_bound(list.begin(), list.end(), t);
      if (production)
        times.insert_production_at(v, static_cast<int32_t>(at - list.begin()), t);
      else
        times.insert_use(v, t);
      list.insert(at, t);
    }
    if (step % 997 == 0) expect_same(times, ref);
  }
  expect_same(times, ref);
}

}  // namespace
}  // namespace remat::fastsa
