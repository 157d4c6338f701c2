// generate.h — synthetic problems for tests and benchmarks (`remat gen KIND`).
// Every generator is deterministic in its parameters and seed; parameters are documented in
// docs/formats.md (Generators).
//   Graph g = generate_random_layered({.num_nodes = 1000, .seed = 7});
#pragma once

#include <cstdint>
#include <string>

#include "remat/chain.h"
#include "remat/graph.h"

namespace remat {

// A layered random DAG in the style of the MOCCASIN data set: nodes are split into layers of
// random width; each node reads from the previous layer with probability `edge_density` (at least
// one edge) and from earlier layers with probability `skip_density`; sizes and durations are
// uniform in their ranges. Nodes with no users are graph outputs; there are no graph inputs.
// Generators refuse more nodes than this, and random-layered refuses parameters whose expected
// edge count exceeds kMaxGeneratedEdges, with a clear message instead of exhausting memory.
inline constexpr int32_t kMaxGeneratedNodes = 10'000'000;
inline constexpr double kMaxGeneratedEdges = 5e8;

struct RandomLayeredParams {
  int32_t num_nodes = 100;
  uint64_t seed = 1;
  double width = 0.3;          // mean layer width = max(1, width * sqrt(num_nodes) * 2)
  double edge_density = 0.2;   // probability of an edge to each node of the previous layer
  double skip_density = 0.14;  // probability of an edge to a node of an earlier layer (scaled)
  int32_t skip_window = 0;     // how many layers before the previous a skip edge may reach (0: all)
  int64_t min_size = 100;
  int64_t max_size = 5000;
  double min_cost = 1;
  double max_cost = 1000;
};
Graph generate_random_layered(const RandomLayeredParams& params);

// A joint forward+backward training graph, phases labelled, for the solvers that need phases
// (min-cut). The forward is a random chain of layer patterns over activations of `rows` x width
// elements, with residual adds and products reaching back to earlier activations: linear (matmul,
// `compute`), layer norm (`compute`), pointwise activations, cos (whose derivative helper sin(x)
// reads only forward values), rms-style norm (a shrinking `reduction` then a pointwise scale),
// softmax, dropout (`random` rand_like, not recomputable, then a boolean mask), views (aliases)
// and dtype casts; then loss = mean(last activation). The backward, in reverse order, has for each
// forward node the gradient nodes that read the gradient of its outputs and the forward values its
// derivative needs, and an `add` wherever two gradients of one value meet. Graph inputs: the data,
// the parameters and the gradient seed `grad_loss` (read only by the backward); outputs: the loss
// and the parameter gradients. Costs are FLOPs; sizes are bytes (float32, float16 after a cast,
// one byte per mask element). The node count is num_nodes minus at most 8 (whole patterns only).
struct JointParams {
  int32_t num_nodes = 200;
  uint64_t seed = 1;
  int32_t rows = 2048;     // rows of every activation (batch x sequence)
  int32_t min_width = 64;  // features of an activation: a power of two in [min, max]
  int32_t max_width = 1024;
};
Graph generate_joint(const JointParams& params);

// Heterogeneous chains (Rotor's model, `remat gen chain`):
//   resnet: a ResNet-like chain of any length: a stem stage, bottleneck blocks in four groups
//           (activation size halves from group to group, the first block of a group downsamples
//           and costs more), a pooling + classifier stage, then the loss. Sizes in bytes for a
//           batch of `batch` 224x224 images in fp32; times in ms, jittered by ±10%.
//   random: every size uniform in [min_size, max_size] with ω_ā >= ω_a and ω_δ = ω_a, overheads
//           in [0, max_size], times integers in [1, max_time]; small integers suit bins=exact.
//   Chain c = generate_chain({.kind = "resnet", .length = 339});
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

}  // namespace remat
