#include "chain_arrays.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "remat/error.h"

namespace remat::rotor {

ChainArrays<int64_t> chain_arrays(const Chain& chain) {
  ChainArrays<int64_t> c;
  c.n = static_cast<int>(chain.stages.size());
  const auto size = static_cast<size_t>(c.n + 1);
  c.a.assign(size, 0);
  c.abar.assign(size, 0);
  c.delta.assign(size, 0);
  c.of.assign(size, 0);
  c.ob.assign(size, 0);
  c.uf.assign(size, 0);
  c.ub.assign(size, 0);
  c.a[0] = chain.input.a;
  c.abar[0] = chain.input.abar;
  c.delta[0] = chain.input.delta;
  for (int l = 1; l <= c.n; ++l) {
    const ChainStage& s = chain.stages[static_cast<size_t>(l - 1)];
    c.a[l] = s.sizes.a;
    c.abar[l] = s.sizes.abar;
    c.delta[l] = s.sizes.delta;
    c.of[l] = s.o_f;
    c.ob[l] = s.o_b;
    c.uf[l] = s.u_f;
    c.ub[l] = s.u_b;
  }
  return c;
}

Discretisation discretise(const ChainArrays<int64_t>& chain, int64_t budget_bytes, int64_t bins) {
  Discretisation d;
  d.bin_bytes = bins > 0 ? std::max<int64_t>(1, (budget_bytes + bins - 1) / bins) : 1;
  const int64_t b = d.bin_bytes;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max() / 8;
  auto to_bins = [&](int64_t bytes) {
    const int64_t up = (bytes + b - 1) / b;
    if (up > kMax)
      throw InputError(
          fmt::format("rotor: a size of {} bytes is {} bins of {} bytes, too many for "
                      "the DP (use fewer bins)",
                      bytes, up, b));
    return static_cast<int32_t>(up);
  };
  auto convert = [&](const std::vector<int64_t>& in) {
    std::vector<int32_t> out(in.size());
    std::transform(in.begin(), in.end(), out.begin(), to_bins);
    return out;
  };
  ChainArrays<int32_t>& c = d.chain;
  c.n = chain.n;
  c.a = convert(chain.a);
  c.abar = convert(chain.abar);
  c.delta = convert(chain.delta);
  c.of = convert(chain.of);
  c.ob = convert(chain.ob);
  c.uf = chain.uf;
  c.ub = chain.ub;
  c.extra.resize(chain.extra.size());
  for (size_t s = 0; s < chain.extra.size(); ++s)
    for (const StageOption<int64_t>& o : chain.extra[s])
      c.extra[s].push_back({o.uf, o.ub, to_bins(o.abar), to_bins(o.of), to_bins(o.ob)});
  d.budget_bins = static_cast<int32_t>(std::min<int64_t>(budget_bytes / b, kMax));
  return d;
}

}  // namespace remat::rotor
