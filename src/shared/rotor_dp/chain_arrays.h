// chain_arrays.h — a chain as flat arrays indexed the paper's way (ℓ = 0..L+1), in bytes or in
// memory bins, for the dynamic programs (dp.h).
// Options (Rockmate's rk-Rotor, docs/solvers/rockmate.md): a stage may carry more
// ways to run F_all^ℓ .. B^ℓ than the one in the arrays, each with its own times, kept bytes and
// overheads (F_ck and F_∅ always use the arrays). The persistent DP takes the best option in its
// F_all branch; with no extra options it is exactly Rotor's DP.
// Discretisation (§5.2): a budget of M bytes is cut into S bins of ceil(M / S) bytes; every size
// is rounded *up* to whole bins and the budget *down*, so a plan that fits in bins fits in bytes.
//   ChainArrays<int64_t> bytes = chain_arrays(chain);
//   Discretisation d = discretise(bytes, budget_bytes, /*bins=*/500);  // d.chain.a[ℓ] in bins
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "remat/chain.h"

namespace remat::rotor {

// One way to run F_all^ℓ then, later, B^ℓ: what it costs, keeps between the two, and needs above.
template <class Size>
struct StageOption {
  double uf = 0, ub = 0;  // forward and backward times
  Size abar = 0;          // ω_ā: bytes kept from F^ℓ to B^ℓ (contains a^ℓ)
  Size of = 0, ob = 0;    // forward and backward overheads
};

template <class Size>
struct ChainArrays {
  int n = 0;                         // L + 1: the number of stages, loss included; stages are 1..n
  std::vector<Size> a, abar, delta;  // index 0..n (a^0 is the input)
  std::vector<Size> of, ob;          // index 1..n (0 unused)
  std::vector<double> uf, ub;        // index 1..n (0 unused)
  // Extra F_all/B options of stage ℓ at extra[ℓ] (option k >= 1 is extra[ℓ][k - 1]; option 0 is
  // the arrays above). Empty (the default), or n + 1 lists. An extra option is never faster than
  // option 0 (uf + ub): the DP fills every memory above the store-all need with its makespan.
  std::vector<std::vector<StageOption<Size>>> extra;

  int options(int s) const {
    return 1 + (extra.empty() ? 0 : static_cast<int>(extra[static_cast<size_t>(s)].size()));
  }
  StageOption<Size> option(int s, int k) const {
    if (k == 0) return {uf[s], ub[s], abar[s], of[s], ob[s]};
    return extra[static_cast<size_t>(s)][static_cast<size_t>(k - 1)];
  }
};

ChainArrays<int64_t> chain_arrays(const Chain& chain);

// The memory conditions the DPs share (a^{s-1} not counted; δ^t stored throughout).
// F_all^s, then later B^s.
template <class Size>
Size forward_all_memory(const ChainArrays<Size>& c, int s, int t) {
  return std::max<Size>(c.delta[t] + c.abar[s] + c.of[s],
                        c.delta[s] + c.delta[s - 1] + c.abar[s] + c.ob[s]);
}
// The same for option `o` of stage s.
template <class Size>
Size forward_all_memory(const ChainArrays<Size>& c, const StageOption<Size>& o, int s, int t) {
  return std::max<Size>(c.delta[t] + o.abar + o.of, c.delta[s] + c.delta[s - 1] + o.abar + o.ob);
}
// F_ck^s, then F_∅^{s+1..t-1}.
template <class Size>
Size forward_none_memory(const ChainArrays<Size>& c, int s, int t) {
  Size peak = c.a[s] + c.of[s];
  for (int j = s + 1; j < t; ++j) peak = std::max<Size>(peak, c.a[j - 1] + c.a[j] + c.of[j]);
  return c.delta[t] + peak;
}

struct Discretisation {
  ChainArrays<int32_t> chain;
  int64_t bin_bytes = 1;
  int32_t budget_bins = 0;  // floor(budget / bin_bytes)
};
// bins = 0: exact (one byte per bin). Throws InputError when a size would not fit in 31 bits.
Discretisation discretise(const ChainArrays<int64_t>& chain, int64_t budget_bytes, int64_t bins);

// Above every feasible memory (a chain's bytes total at most kMaxChainBytes = 2^61), and still
// representable after adding a few of its sizes.
inline constexpr int64_t kNoBytes = int64_t{1} << 62;

}  // namespace remat::rotor
