// chain.h — the heterogeneous chain model of the Rotor paper (Table 1), read and written here;
// its solvers and simulator live with Rotor (src/solvers/rotor/).
// A chain has L stages plus the loss as stage L+1 (the last entry of `stages`). Stage ℓ has
// forward/backward times u_f, u_b, the sizes of its output activation a^ℓ, of all intermediate
// values ā^ℓ saved by F_all, and of the gradient δ^ℓ, and the memory overheads o_f, o_b.
// `input` holds the sizes of a^0, ā^0 and δ^0.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace remat {

// Rotor's DPs add sizes along the chain and mark impossible entries with a value above every
// feasible one (2^62), so a chain's sizes and overheads together may be at most 2^61 bytes, and its
// times together at most 1e100 (any unit).
inline constexpr int64_t kMaxChainBytes = int64_t{1} << 61;
inline constexpr double kMaxTotalTime = 1e100;

struct ChainSizes {
  int64_t a = 0;      // ω_a: bytes of the stage output a^ℓ
  int64_t abar = 0;   // ω_ā: bytes of ā^ℓ (contains a^ℓ)
  int64_t delta = 0;  // ω_δ: bytes of δ^ℓ
};

struct ChainStage {
  std::string name;
  double u_f = 0;  // forward time
  double u_b = 0;  // backward time
  ChainSizes sizes;
  int64_t o_f = 0;  // forward memory overhead
  int64_t o_b = 0;  // backward memory overhead
};

struct Chain {
  std::string name;
  ChainSizes input;                // a^0, ā^0, δ^0
  std::vector<ChainStage> stages;  // stages 1..L, then the loss as stage L+1
  int length() const { return static_cast<int>(stages.size()) - 1; }  // L
};

// Throws InputError naming `source` and the stage when the totals above are exceeded.
void check_chain_limits(const Chain& chain, std::string_view source);

}  // namespace remat
