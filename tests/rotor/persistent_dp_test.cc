// The persistent DP (Algorithm 3/4, src/shared/rotor_dp/persistent_dp.cc) against a plain reference
// written here: the same recurrence, entry by entry, sub-chains by increasing length, each entry
// the minimum of its candidates in the DP's single precision ((add + x) + y), and Algorithm 4 with
// the DP's tie rule (the first smallest candidate: F_all options, then the splits by increasing
// s2). The DP fills its table in tiles and memory order of its own choosing and skips entries it
// can prove unchanged; none of that may change a value, so its optimum must be bit-identical and
// its sequence and options equal to the reference's, on random heterogeneous chains with and
// without extra stage options, both families, budgets from the least to above the store-all peak.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "remat/generate.h"
#include "remat/random.h"
#include "rotor_dp/dp.h"

namespace remat::rotor {
namespace {

class ReferenceDp {
 public:
  ReferenceDp(const ChainArrays<int32_t>& c, PersistentFamily family, int64_t top_m)
      : c_(c), family_(family), n_(c.n), width_(top_m + 1) {
    values_.assign(static_cast<size_t>((n_ + 1) * (n_ + 1) * width_), kInfinityF);
    for (int span = 0; span < n_; ++span)
      for (int s = 1; s + span <= n_; ++s)
        for (int64_t m = 0; m < width_; ++m) at(s, s + span, m) = value(s, s + span, m);
  }

  float optimum() const { return at(1, n_, width_ - 1); }

  // Algorithm 4 from the reference's table.
  void rebuild(int s, int t, int64_t m, ChainSequence& ops, std::vector<int32_t>& options) const {
    const Best b = best(s, t, m);
    if (s == t || b.split == 0) {
      ops.push_back({ChainOpKind::kForwardAll, s});
      options.push_back(b.option);
      if (s < t) rebuild(s + 1, t, m - c_.option(s, b.option).abar, ops, options);
      ops.push_back({ChainOpKind::kBackward, s});
      options.push_back(b.option);
      return;
    }
    ops.push_back({ChainOpKind::kForwardCheckpoint, s});
    options.push_back(0);
    for (int j = s + 1; j < b.split; ++j) {
      ops.push_back({ChainOpKind::kForwardNoSave, j});
      options.push_back(0);
    }
    rebuild(b.split, t, m - c_.a[b.split - 1], ops, options);
    rebuild(s, b.split - 1, m, ops, options);
  }

 private:
  struct Best {
    float value = kInfinityF;
    int split = 0;  // 0: F_all^s; s2 > s: F_ck^s, then F_∅ up to a^{s2-1}
    int option = 0;
  };

  float& at(int s, int t, int64_t m) {
    return values_[static_cast<size_t>((s * (n_ + 1) + t) * width_ + m)];
  }
  float at(int s, int t, int64_t m) const {
    return values_[static_cast<size_t>((s * (n_ + 1) + t) * width_ + m)];
  }

  // Theorem 4.8's memory conditions, written out.
  int64_t none_memory(int s, int t) const {
    int64_t peak = c_.a[s] + c_.of[s];
    for (int j = s + 1; j < t; ++j)
      peak = std::max<int64_t>(peak, c_.a[j - 1] + c_.a[j] + c_.of[j]);
    return c_.delta[t] + peak;
  }
  int64_t all_memory(const StageOption<int32_t>& o, int s, int t) const {
    return std::max<int64_t>(c_.delta[t] + o.abar + o.of,
                             c_.delta[s] + c_.delta[s - 1] + o.abar + o.ob);
  }
  // The store-all sequence of s..t: the memory it needs and its makespan. The DP takes that
  // makespan (summed from t down to s) for every m from that memory on, where nothing is faster.
  int64_t store_all_memory(int s, int t) const {
    int64_t stored = 0, forward = 0, backward = 0;
    for (int j = s; j <= t; ++j) {
      stored += c_.abar[j];
      forward = std::max<int64_t>(forward, stored + c_.of[j]);
      backward = std::max<int64_t>(backward, stored + c_.delta[j] + c_.delta[j - 1] + c_.ob[j]);
    }
    return std::max(c_.delta[t] + forward, backward);
  }
  double store_all_makespan(int s, int t) const {
    double total = c_.uf[t] + c_.ub[t];
    for (int j = t - 1; j >= s; --j) total = (c_.uf[j] + c_.ub[j]) + total;
    return total;
  }

  Best best(int s, int t, int64_t m) const {
    Best b;
    if (s == t || family_ == PersistentFamily::kRotor)
      for (int k = 0; k < c_.options(s); ++k) {
        const StageOption<int32_t> o = c_.option(s, k);
        if (m < all_memory(o, s, t) || m < o.abar) continue;
        const auto time = static_cast<float>(o.uf + o.ub);
        const float v = s == t ? time : time + at(s + 1, t, m - o.abar);
        if (v < b.value) b = {v, 0, k};
      }
    if (s < t && m >= none_memory(s, t)) {
      double forward = 0;
      for (int s2 = s + 1; s2 <= t; ++s2) {
        forward += c_.uf[s2 - 1];
        if (m < c_.a[s2 - 1]) continue;
        const float v =
            static_cast<float>(forward) + at(s2, t, m - c_.a[s2 - 1]) + at(s, s2 - 1, m);
        if (v < b.value) b = {v, s2, 0};
      }
    }
    return b;
  }

  float value(int s, int t, int64_t m) const {
    if (family_ == PersistentFamily::kRotor && m >= store_all_memory(s, t))
      return static_cast<float>(store_all_makespan(s, t));
    return best(s, t, m).value;
  }

  const ChainArrays<int32_t>& c_;
  PersistentFamily family_;
  int n_;
  int64_t width_;
  std::vector<float> values_;
};

// A random heterogeneous chain in bytes; every third one with up to two extra options per stage
// (never faster than option 0, as rockmate's are).
ChainArrays<int64_t> random_chain(Rng& rng, int length) {
  const bool resnet = rng.below(3) == 0;  // jittered real times; else small integer times (ties)
  const Chain chain =
      resnet ? generate_chain({.kind = "resnet", .length = length, .seed = rng.next(), .batch = 2})
             : generate_chain({.kind = "random",
                               .length = length,
                               .seed = rng.next(),
                               .max_size = rng.between(5, 1000),
                               .max_time = static_cast<int32_t>(rng.between(2, 20))});
  ChainArrays<int64_t> c = chain_arrays(chain);
  if (rng.below(3) == 0) {
    c.extra.resize(static_cast<size_t>(c.n + 1));
    for (int s = 1; s <= c.n; ++s)
      for (int k = static_cast<int>(rng.below(3)); k > 0; --k)
        c.extra[static_cast<size_t>(s)].push_back(
            {c.uf[s] + static_cast<double>(rng.below(4)),
             c.ub[s] + static_cast<double>(rng.below(4)), c.a[s] + rng.between(0, c.abar[s]),
             rng.between(0, c.of[s] + c.a[s]), rng.between(0, c.ob[s] + c.a[s])});
  }
  return c;
}

TEST(PersistentDp, MatchesThePlainRecurrenceBitForBit) {
  Rng rng(20261127);
  int compared = 0, found = 0;
  for (int i = 0; i < 60; ++i) {
    // Up to 81 stages: several tiles of s and t (24 rows a side), so tiles away from the diagonal
    // get the splits of finished tiles first, in more than one block of s2 on the longest chains.
    const int length = static_cast<int>(rng.between(1, i % 4 == 0 ? 80 : 40));
    const ChainArrays<int64_t> bytes = random_chain(rng, length);
    const int64_t least = persistent_min_memory(bytes, PersistentFamily::kRotor).bytes;
    int64_t total = 0;
    for (int l = 0; l <= bytes.n; ++l) total += bytes.abar[l] + bytes.delta[l];
    const int64_t budget = least + static_cast<int64_t>(rng.uniform() * (total - least) * 1.1);
    const Discretisation d = discretise(bytes, budget, rng.between(20, 150));
    for (PersistentFamily family : {PersistentFamily::kRotor, PersistentFamily::kRevolve}) {
      SCOPED_TRACE(::testing::Message()
                   << "chain " << i << ", L = " << length << ", budget " << budget << " in "
                   << d.budget_bins << " bins, "
                   << (family == PersistentFamily::kRotor ? "rotor" : "revolve"));
      const DpOutcome dp = persistent_dp(d, family, {});
      const int64_t top_m = int64_t{d.budget_bins} - d.chain.a[0];
      if (top_m < 0) {
        EXPECT_FALSE(dp.ops.has_value());
        continue;
      }
      const ReferenceDp ref(d.chain, family, top_m);
      ++compared;
      EXPECT_EQ(std::bit_cast<uint64_t>(dp.makespan),
                std::bit_cast<uint64_t>(static_cast<double>(ref.optimum())))
          << dp.makespan << " against " << ref.optimum();
      ASSERT_EQ(dp.ops.has_value(), ref.optimum() < kInfinityF);
      if (!dp.ops) continue;
      ++found;
      ChainSequence ops;
      std::vector<int32_t> options;
      ref.rebuild(1, d.chain.n, top_m, ops, options);
      EXPECT_EQ(format_sequence(*dp.ops), format_sequence(ops));
      EXPECT_EQ(dp.options, options);
    }
  }
  EXPECT_GT(found, compared / 2);  // most budgets are feasible: the sequences were compared
}

// The galloping search gives the plain search's answer from any guess (an answer too small would
// leave entries unrelaxed; too large, relax more than counted before).
TEST(PersistentDp, GallopingSearchAgreesWithHalving) {
  Rng rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int size = static_cast<int>(rng.between(1, 40));
    std::vector<float> row(static_cast<size_t>(size));
    float v = rng.below(4) == 0 ? kInfinityF : 100.0f;
    for (float& x : row) {  // non-increasing, with runs of equal values
      if (rng.below(3) == 0)
        v = v == kInfinityF ? 100.0f : v - static_cast<float>(rng.between(0, 5));
      x = v;
    }
    for (int lo = 0; lo <= size; ++lo)
      for (int hi = lo; hi <= size; ++hi)
        for (float threshold : {row[static_cast<size_t>(rng.below(size))], 50.0f, -1.0f})
          for (int hint = -1; hint <= size + 1; ++hint)
            ASSERT_EQ(first_at_most_near(row.data(), lo, hi, threshold, hint),
                      first_at_most(row.data(), int64_t{lo}, int64_t{hi}, threshold))
                << "size " << size << " lo " << lo << " hi " << hi << " hint " << hint;
  }
}

// The work limit stops the DP at the same count on every run, with no sequence.
TEST(PersistentDp, WorkLimitStopsAtTheSameCount) {
  const Chain chain = generate_chain({.kind = "resnet", .length = 60, .batch = 8});
  const ChainArrays<int64_t> bytes = chain_arrays(chain);
  const int64_t least = persistent_min_memory(bytes, PersistentFamily::kRotor).bytes;
  const Discretisation d = discretise(bytes, least * 2, 300);
  const DpOutcome full = persistent_dp(d, PersistentFamily::kRotor, {});
  ASSERT_TRUE(full.ops.has_value());
  EXPECT_FALSE(full.work_limit_hit);
  const DpControl half = {.max_relaxed = full.relaxed / 2};
  const DpOutcome a = persistent_dp(d, PersistentFamily::kRotor, half);
  const DpOutcome b = persistent_dp(d, PersistentFamily::kRotor, half);
  EXPECT_TRUE(a.work_limit_hit);
  EXPECT_FALSE(a.ops.has_value());
  EXPECT_GE(a.relaxed, full.relaxed / 2);
  EXPECT_LT(a.relaxed, full.relaxed);
  EXPECT_EQ(a.relaxed, b.relaxed);
}

}  // namespace
}  // namespace remat::rotor
