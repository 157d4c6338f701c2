// generate_chain.h — synthetic heterogeneous chains for tests and benchmarks (`remat gen chain`).
// Deterministic in the parameters and seed.
//   resnet: a ResNet-like chain of any length: a stem stage, bottleneck blocks in four groups
//           (activation size halves from group to group, the first block of a group downsamples
//           and costs more), a pooling + classifier stage, then the loss. Sizes in bytes for a
//           batch of `batch` 224x224 images in fp32; times in ms, jittered by ±10%.
//   random: every size uniform in [min_size, max_size] with ω_ā >= ω_a and ω_δ = ω_a, overheads
//           in [0, max_size], times integers in [1, max_time]; small integers suit bins=exact.
//   Chain c = generate_chain({.kind = "resnet", .length = 339});
#pragma once

#include <cstdint>
#include <string>

#include "remat/chain.h"

namespace remat::rotor {

struct ChainGenParams {
  std::string kind = "resnet";  // resnet | random
  int32_t length = 20;          // L, stages before the loss
  uint64_t seed = 1;
  int32_t batch = 8;     // resnet: images per batch
  int64_t min_size = 1;  // random: sizes
  int64_t max_size = 10;
  int32_t max_time = 10;  // random: u_f, u_b in [1, max_time]
};

// Throws InputError for an unknown kind or an out-of-range parameter.
Chain generate_chain(const ChainGenParams& params);

}  // namespace remat::rotor
