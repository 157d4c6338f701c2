// check_chain_limits: the totals every chain reader and builder checks.
#include <fmt/format.h>

#include "remat/chain.h"
#include "remat/error.h"

namespace remat {

void check_chain_limits(const Chain& chain, std::string_view source) {
  int64_t bytes = 0;
  double time = 0;
  const auto add_bytes = [&](int64_t more, std::string_view where) {
    if (more < 0)
      throw InputError(fmt::format("{}: {}: a size is negative ({} bytes)", source, where, more));
    if (more > kMaxChainBytes - bytes)
      throw InputError(fmt::format(
          "{}: {}: the chain's sizes and overheads add up to more than {} bytes, the limit", source,
          where, kMaxChainBytes));
    bytes += more;
  };
  const auto add_sizes = [&](const ChainSizes& s, std::string_view where) {
    add_bytes(s.a, where);
    add_bytes(s.abar, where);
    add_bytes(s.delta, where);
  };
  add_sizes(chain.input, "input");
  for (size_t i = 0; i < chain.stages.size(); ++i) {
    const ChainStage& stage = chain.stages[i];
    const std::string where = fmt::format("stage {}", i + 1);
    add_sizes(stage.sizes, where);
    add_bytes(stage.o_f, where);
    add_bytes(stage.o_b, where);
    if (!(stage.u_f >= 0) || !(stage.u_b >= 0))
      throw InputError(fmt::format("{}: {}: times must be finite and >= 0 (u_f {}, u_b {})", source,
                                   where, stage.u_f, stage.u_b));
    time += stage.u_f + stage.u_b;
    if (!(time <= kMaxTotalTime))
      throw InputError(fmt::format("{}: {}: the chain's times add up to more than {:g}, the limit",
                                   source, where, kMaxTotalTime));
  }
}

}  // namespace remat
