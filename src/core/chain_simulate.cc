// The chain simulator (chain.h): Definitions 3.1–3.4 of the Rotor paper.
#include <fmt/format.h>

#include <algorithm>

#include "remat/chain.h"
#include "remat/error.h"

namespace remat {
namespace {

// Sizes by the paper's index ℓ = 0..L+1.
struct Sizes {
  std::vector<int64_t> a, abar, delta;
};

Sizes sizes_by_index(const Chain& chain) {
  Sizes s;
  const size_t n = chain.stages.size() + 1;
  s.a.reserve(n);
  s.abar.reserve(n);
  s.delta.reserve(n);
  s.a.push_back(chain.input.a);
  s.abar.push_back(chain.input.abar);
  s.delta.push_back(chain.input.delta);
  for (const ChainStage& stage : chain.stages) {
    s.a.push_back(stage.sizes.a);
    s.abar.push_back(stage.sizes.abar);
    s.delta.push_back(stage.sizes.delta);
  }
  return s;
}

std::string op_label(const ChainOp& op) {
  switch (op.kind) {
    case ChainOpKind::kForwardCheckpoint:
      return fmt::format("F{}ck", op.stage);
    case ChainOpKind::kForwardNoSave:
      return fmt::format("F{}∅", op.stage);
    case ChainOpKind::kForwardAll:
      return fmt::format("F{}all", op.stage);
    case ChainOpKind::kBackward:
      return fmt::format("B{}", op.stage);
  }
  return "?";
}

// What is stored, by index, and its total size.
class Memory {
 public:
  explicit Memory(const Sizes& sizes) : sizes_(sizes) {
    const size_t n = sizes.a.size();
    a_.assign(n, false);
    abar_.assign(n, false);
    delta_.assign(n, false);
  }
  bool a(int i) const { return a_[i]; }
  bool abar(int i) const { return abar_[i]; }
  bool delta(int i) const { return delta_[i]; }
  void set_a(int i, bool on) { update(a_, sizes_.a, i, on); }
  void set_abar(int i, bool on) { update(abar_, sizes_.abar, i, on); }
  void set_delta(int i, bool on) { update(delta_, sizes_.delta, i, on); }
  int64_t bytes() const { return bytes_; }

 private:
  void update(std::vector<bool>& present, const std::vector<int64_t>& size, int i, bool on) {
    if (present[i] == on) return;
    present[i] = on;
    bytes_ += on ? size[i] : -size[i];
  }
  const Sizes& sizes_;
  std::vector<bool> a_, abar_, delta_;
  int64_t bytes_ = 0;
};

}  // namespace

std::string_view op_name(ChainOpKind kind) {
  switch (kind) {
    case ChainOpKind::kForwardCheckpoint:
      return "F_ck";
    case ChainOpKind::kForwardNoSave:
      return "F_none";
    case ChainOpKind::kForwardAll:
      return "F_all";
    case ChainOpKind::kBackward:
      return "B";
  }
  return "?";
}

std::optional<ChainOpKind> parse_op_name(std::string_view name) {
  if (name == "F_ck") return ChainOpKind::kForwardCheckpoint;
  if (name == "F_none" || name == "F_∅") return ChainOpKind::kForwardNoSave;
  if (name == "F_all") return ChainOpKind::kForwardAll;
  if (name == "B") return ChainOpKind::kBackward;
  return std::nullopt;
}

std::string format_sequence(std::span<const ChainOp> ops) {
  std::string out;
  for (const ChainOp& op : ops) {
    if (!out.empty()) out += ' ';
    out += op_label(op);
  }
  return out;
}

ChainSequence store_all_sequence(const Chain& chain) {
  ChainSequence ops;
  const int last = chain.length() + 1;
  for (int l = 1; l <= last; ++l) ops.push_back({ChainOpKind::kForwardAll, l});
  for (int l = last; l >= 1; --l) ops.push_back({ChainOpKind::kBackward, l});
  return ops;
}

void validate_chain(const Chain& chain, std::string_view source) {
  if (chain.length() < 1)
    throw InputError(
        fmt::format("{}: a chain needs at least one stage before the loss stage", source));
  check_chain_limits(chain, source);
}

ChainEvaluation simulate_chain(const Chain& chain, std::span<const ChainOp> ops) {
  ChainEvaluation e;
  const Sizes sizes = sizes_by_index(chain);
  const int last = chain.length() + 1;  // the loss stage
  Memory mem(sizes);
  mem.set_a(0, true);
  mem.set_delta(last, true);
  e.timeline.reserve(ops.size());
  auto fail = [&](size_t step, std::string what) {
    e.valid = false;
    e.error = fmt::format("op {} ({}): {}", step, op_label(ops[step]), what);
    e.error_step = static_cast<int32_t>(step);
    return e;
  };
  for (size_t step = 0; step < ops.size(); ++step) {
    const ChainOp& op = ops[step];
    const int l = op.stage;
    if (l < 1 || l > last) return fail(step, fmt::format("stage must be in 1..{}", last));
    const ChainStage& stage = chain.stages[static_cast<size_t>(l - 1)];
    const bool input_stored = mem.a(l - 1) || mem.abar(l - 1);
    int64_t during = 0;
    if (op.kind == ChainOpKind::kBackward) {
      if (!mem.delta(l)) return fail(step, fmt::format("δ^{} is not in memory", l));
      if (!mem.abar(l)) return fail(step, fmt::format("ā^{} is not in memory", l));
      if (!input_stored) return fail(step, fmt::format("a^{} is not in memory", l - 1));
      during = mem.bytes() + (mem.delta(l - 1) ? 0 : sizes.delta[l - 1]) + stage.o_b;
      mem.set_delta(l, false);
      mem.set_abar(l, false);
      mem.set_a(l - 1, false);
      mem.set_delta(l - 1, true);
      e.cost += stage.u_b;
    } else {
      if (!input_stored) return fail(step, fmt::format("a^{} is not in memory", l - 1));
      const bool all = op.kind == ChainOpKind::kForwardAll;
      const bool output_stored = all ? mem.abar(l) : mem.a(l);
      during = mem.bytes() + (output_stored ? 0 : (all ? sizes.abar[l] : sizes.a[l])) + stage.o_f;
      if (all)
        mem.set_abar(l, true);
      else
        mem.set_a(l, true);
      // ā^ℓ holds on to its input (autograd keeps it for B^ℓ), so F_∅^ℓ cannot free a^{ℓ-1} then.
      if (op.kind == ChainOpKind::kForwardNoSave && !mem.abar(l)) mem.set_a(l - 1, false);
      e.cost += stage.u_f;
    }
    e.timeline.push_back(during);
    if (during > e.peak_bytes || e.peak_step < 0) {
      e.peak_bytes = during;
      e.peak_step = static_cast<int32_t>(step);
    }
  }
  if (!mem.delta(0)) {
    e.valid = false;
    e.error = "the sequence ends without computing δ^0 (B1 never runs)";
    return e;
  }
  e.valid = true;
  return e;
}

}  // namespace remat
