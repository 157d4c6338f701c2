// Synthetic heterogeneous chains (generate.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "remat/error.h"
#include "remat/generate.h"
#include "remat/random.h"

namespace remat {
namespace {

ChainStage loss_stage() { return {"loss", 0, 0, {0, 0, 0}, 0, 0}; }

Chain random_chain(const ChainGenParams& p) {
  if (p.min_size < 0 || p.max_size < p.min_size)
    throw InputError(fmt::format("gen chain: need 0 <= min-size <= max-size (got {} and {})",
                                 p.min_size, p.max_size));
  if (p.max_time < 1)
    throw InputError(fmt::format("gen chain: max-time must be >= 1 (got {})", p.max_time));
  Rng rng(p.seed);
  Chain chain;
  chain.name = fmt::format("random-L{}-seed{}", p.length, p.seed);
  const int64_t a0 = rng.between(p.min_size, p.max_size);
  chain.input = {a0, a0, a0};
  for (int l = 1; l <= p.length; ++l) {
    ChainStage s;
    s.name = fmt::format("F{}", l);
    s.sizes.a = rng.between(p.min_size, p.max_size);
    s.sizes.abar = rng.between(s.sizes.a, std::max(s.sizes.a, p.max_size));
    s.sizes.delta = s.sizes.a;
    s.o_f = rng.between(0, p.max_size);
    s.o_b = rng.between(0, p.max_size);
    s.u_f = static_cast<double>(rng.between(1, p.max_time));
    s.u_b = static_cast<double>(rng.between(1, p.max_time));
    chain.stages.push_back(std::move(s));
  }
  chain.stages.push_back(loss_stage());
  return chain;
}

Chain resnet_chain(const ChainGenParams& p) {
  if (p.batch < 1) throw InputError(fmt::format("gen chain: batch must be >= 1 (got {})", p.batch));
  Rng rng(p.seed);
  auto jitter = [&rng](double x) { return x * (0.9 + 0.2 * rng.uniform()); };
  const auto image = int64_t{p.batch} * 3 * 224 * 224 * 4;
  const auto stem_out = int64_t{p.batch} * 256 * 56 * 56 * 4;  // conv + pool, then 256 channels
  Chain chain;
  chain.name = fmt::format("resnet-like-L{}-b{}", p.length, p.batch);
  chain.input = {image, image, image};
  const int blocks = std::max(0, p.length - 2);
  const int groups = std::min(4, std::max(1, blocks));
  auto add = [&](std::string name, int64_t a, double abar_factor, double of_factor,
                 double ob_factor, double ms) {
    ChainStage s;
    s.name = std::move(name);
    s.sizes.a = a;
    s.sizes.abar = static_cast<int64_t>(static_cast<double>(a) * jitter(abar_factor));
    s.sizes.delta = a;
    s.o_f = static_cast<int64_t>(static_cast<double>(a) * jitter(of_factor));
    s.o_b = static_cast<int64_t>(static_cast<double>(a) * jitter(ob_factor));
    s.u_f = jitter(ms);
    s.u_b = jitter(2 * ms);
    chain.stages.push_back(std::move(s));
  };
  if (p.length >= 2) add("stem", stem_out, 2.5, 0.5, 1.0, 2.0 * p.batch / 8);
  int done = 0;
  for (int g = 0; g < groups; ++g) {
    const int in_group = blocks / groups + (g < blocks % groups ? 1 : 0);
    const int64_t a = stem_out >> g;  // channels x2, pixels /4 per group
    for (int b = 0; b < in_group; ++b, ++done) {
      const bool downsample = b == 0 && g > 0;
      add(fmt::format("block{}.{}", g + 1, b + 1), a, downsample ? 3.5 : 2.5,
          downsample ? 0.8 : 0.3, downsample ? 1.5 : 1.0, (downsample ? 1.6 : 1.0) * p.batch / 8);
    }
  }
  const auto logits = int64_t{p.batch} * 1000 * 4;
  add("head", logits, 1.0, 0.0, 1.0, 0.1 * p.batch / 8);  // pooling + classifier
  chain.stages.push_back(loss_stage());
  return chain;
}

// Far beyond what any DP here can solve; it keeps a typo from allocating gigabytes.
constexpr int kMaxGeneratedLength = 1'000'000;

}  // namespace

Chain generate_chain(const ChainGenParams& params) {
  if (params.length < 1 || params.length > kMaxGeneratedLength)
    throw InputError(fmt::format("gen chain: length must be in [1, {}] (got {})",
                                 kMaxGeneratedLength, params.length));
  Chain chain;
  if (params.kind == "resnet")
    chain = resnet_chain(params);
  else if (params.kind == "random")
    chain = random_chain(params);
  else
    throw InputError(
        fmt::format("gen chain: unknown kind '{}' (known: resnet, random)", params.kind));
  check_chain_limits(chain, "gen chain");
  return chain;
}

}  // namespace remat
