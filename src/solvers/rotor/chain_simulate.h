// chain_simulate.h — the operations of a chain plan and the chain simulator, the one judge of a
// chain plan (Rotor paper, Table 1 and Definitions 3.1–3.4). Chain solvers never report their own
// makespan or peak: every figure comes from simulate_chain().
//
// Memory model. The values are a^ℓ (stage outputs, a^0 is the input), ā^ℓ (everything B^ℓ needs,
// containing a^ℓ) and δ^ℓ (gradients); a stored value occupies its size once. The run starts with
// {a^0, δ^{L+1}} and is valid when every operation finds its inputs and δ^0 is produced:
//   F_ck^ℓ  needs a^{ℓ-1} (or ā^{ℓ-1}), keeps it, adds a^ℓ           time u_f, overhead o_f
//   F_∅^ℓ   needs a^{ℓ-1} (or ā^{ℓ-1}), deletes a^{ℓ-1}, adds a^ℓ    (ā^{ℓ-1} is never deleted,
//           nor is a^{ℓ-1} while ā^ℓ is stored: F_all^ℓ's output holds on to its input)
//   F_all^ℓ needs a^{ℓ-1} (or ā^{ℓ-1}), keeps it, adds ā^ℓ
//   B^ℓ     needs δ^ℓ, ā^ℓ and a^{ℓ-1} (or ā^{ℓ-1}); deletes δ^ℓ, ā^ℓ and a^{ℓ-1}, keeps ā^{ℓ-1},
//           adds δ^{ℓ-1}                                             time u_b, overhead o_b
// The memory of an operation is everything stored before it plus its output plus its overhead
// (Definition 3.3); the peak is the largest over the sequence (Definition 3.4).
//   ChainEvaluation e = simulate_chain(chain, plan.ops);
//   if (!e.valid) fmt::print("{}\n", e.error);  // "op 3 (B4): ā^4 is not in memory"
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "remat/chain.h"

namespace remat::rotor {

enum class OpKind : uint8_t {
  kForwardCheckpoint,  // F_ck
  kForwardNoSave,      // F_∅
  kForwardAll,         // F_all
  kBackward,           // B
};

struct ChainOp {
  OpKind kind = OpKind::kForwardAll;
  int32_t stage = 1;  // 1..L+1 (L+1 is the loss)
  bool operator==(const ChainOp&) const = default;
};

using ChainSequence = std::vector<ChainOp>;

// "F_ck", "F_none", "F_all", "B" (the JSON names; parse also accepts "F_∅").
std::string_view op_name(OpKind kind);
std::optional<OpKind> parse_op_name(std::string_view name);
// The paper's notation, one op per word: "F1ck F2∅ F3all B3".
std::string format_sequence(std::span<const ChainOp> ops);

struct ChainEvaluation {
  bool valid = false;
  std::string error;            // first problem found, when !valid
  double makespan = 0;          // Σ u_f, u_b of the operations (Definition 3.2)
  int64_t peak_bytes = 0;       // Definition 3.4
  int64_t peak_op = -1;         // index of the first operation reaching the peak
  std::vector<int64_t> memory;  // memory of each operation (Definition 3.3)
};

ChainEvaluation simulate_chain(const Chain& chain, std::span<const ChainOp> ops);

// Throws InputError naming the problem when the chain cannot be solved (no stage before the loss).
void validate_chain(const Chain& chain, std::string_view source);

}  // namespace remat::rotor
