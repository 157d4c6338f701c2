// chain_arrays.h — a chain as flat arrays indexed the paper's way (ℓ = 0..L+1), in bytes or in
// memory bins, for the dynamic programs (internal to src/solvers/rotor/).
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

template <class Size>
struct ChainArrays {
  int n = 0;                         // L + 1: the number of stages, loss included; stages are 1..n
  std::vector<Size> a, abar, delta;  // index 0..n (a^0 is the input)
  std::vector<Size> of, ob;          // index 1..n (0 unused)
  std::vector<double> uf, ub;        // index 1..n (0 unused)
};

ChainArrays<int64_t> chain_arrays(const Chain& chain);

// The memory conditions the DPs share (a^{s-1} not counted; δ^t stored throughout).
// F_all^s, then later B^s.
template <class Size>
Size forward_all_memory(const ChainArrays<Size>& c, int s, int t) {
  return std::max<Size>(c.delta[t] + c.abar[s] + c.of[s],
                        c.delta[s] + c.delta[s - 1] + c.abar[s] + c.ob[s]);
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
