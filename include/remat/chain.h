// chain.h — the heterogeneous chain model of the Rotor paper (Table 1), the operations of a chain
// plan and the chain simulator, the one judge of a chain plan (Definitions 3.1–3.4). Chain
// solvers (src/solvers/rotor/, rockmate) never report their own makespan or peak: every figure
// comes from simulate_chain(). Files: io.h (chain and chain plan JSON); generator: generate.h.
// A chain has L stages plus the loss as stage L+1 (the last entry of `stages`). Stage ℓ has
// forward/backward times u_f, u_b, the sizes of its output activation a^ℓ, of all intermediate
// values ā^ℓ saved by F_all, and of the gradient δ^ℓ, and the memory overheads o_f, o_b.
// `input` holds the sizes of a^0, ā^0 and δ^0.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
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

// Memory model of simulate_chain(). The values are a^ℓ (stage outputs, a^0 is the input), ā^ℓ
// (everything B^ℓ needs, containing a^ℓ) and δ^ℓ (gradients); a stored value occupies its size
// once. The run starts with {a^0, δ^{L+1}} and is valid when every operation finds its inputs and
// δ^0 is produced:
//   F_ck^ℓ  needs a^{ℓ-1} (or ā^{ℓ-1}), keeps it, adds a^ℓ           time u_f, overhead o_f
//   F_∅^ℓ   needs a^{ℓ-1} (or ā^{ℓ-1}), deletes a^{ℓ-1}, adds a^ℓ    (ā^{ℓ-1} is never deleted,
//           nor is a^{ℓ-1} while ā^ℓ is stored: F_all^ℓ's output holds on to its input)
//   F_all^ℓ needs a^{ℓ-1} (or ā^{ℓ-1}), keeps it, adds ā^ℓ
//   B^ℓ     needs δ^ℓ, ā^ℓ and a^{ℓ-1} (or ā^{ℓ-1}); deletes δ^ℓ, ā^ℓ and a^{ℓ-1}, keeps ā^{ℓ-1},
//           adds δ^{ℓ-1}                                             time u_b, overhead o_b
// The memory of an operation is everything stored before it plus its output plus its overhead
// (Definition 3.3); the peak is the largest over the sequence (Definition 3.4).
//   ChainEvaluation e = simulate_chain(chain, plan.sequence);
//   if (!e.valid) fmt::print("{}\n", e.error);  // "op 3 (B4): ā^4 is not in memory"

// Named apart from the graph's OpKind (graph.h), which says what a node computes.
enum class ChainOpKind : uint8_t {
  kForwardCheckpoint,  // F_ck
  kForwardNoSave,      // F_∅
  kForwardAll,         // F_all
  kBackward,           // B
};

struct ChainOp {
  ChainOpKind kind = ChainOpKind::kForwardAll;
  int32_t stage = 1;  // 1..L+1 (L+1 is the loss)
  bool operator==(const ChainOp&) const = default;
};

using ChainSequence = std::vector<ChainOp>;

// "F_ck", "F_none", "F_all", "B" (the JSON names; parse also accepts "F_∅").
std::string_view op_name(ChainOpKind kind);
std::optional<ChainOpKind> parse_op_name(std::string_view name);
// The paper's notation, one op per word: "F1ck F2∅ F3all B3".
std::string format_sequence(std::span<const ChainOp> ops);

// The same field names and units as the graph's Evaluation (simulate.h): cost is the makespan.
struct ChainEvaluation {
  bool valid = false;
  std::string error;              // first problem found, when !valid
  int32_t error_step = -1;        // 0-based op of the first violation, -1 if none or at the end
  int64_t peak_bytes = 0;         // Definition 3.4
  int32_t peak_step = -1;         // first op reaching the peak
  double cost = 0;                // Σ u_f, u_b of the operations: the makespan (Definition 3.2)
  std::vector<int64_t> timeline;  // memory of each operation (Definition 3.3)
};

ChainEvaluation simulate_chain(const Chain& chain, std::span<const ChainOp> ops);

// The chain's default schedule, no recomputation: F_all^1..F_all^{L+1}, B^{L+1}..B^1.
ChainSequence store_all_sequence(const Chain& chain);

// Throws InputError naming the problem when the chain cannot be solved: no stage before the loss,
// or what check_chain_limits refuses.
void validate_chain(const Chain& chain, std::string_view source);

// Throws InputError naming `source` and the stage when a size or time is negative or the totals
// above (kMaxChainBytes, kMaxTotalTime) are exceeded. The chain readers and generator call it.
void check_chain_limits(const Chain& chain, std::string_view source);

}  // namespace remat
