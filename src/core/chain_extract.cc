// Graph → chain: backward helpers, shared values, forward separators, stages, backward assignment
// and the chain's sizes (lower.h).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "remat/error.h"
#include "remat/lower.h"
#include "remat/solver.h"

namespace remat {
namespace {

constexpr int32_t kNone = -1;
// Cuts are coarse when one stage holds more than half of the forward nodes (backward helpers
// aside): the chain then tries shared values, and when they do not help on a forward of more
// than this many nodes, its note says why.
constexpr int32_t kNoteForwardNodes = 100;
// A value may be shared when it is at most 1/ratio of the activation bytes made while it lives,
// at the first of these ratios whose cuts are not coarse. A value made from graph inputs alone
// without a matrix product (a mask, a position bias), which no activation's size sets and which
// is cheap to make, may be up to 1/kFromInputsRatio of them at every ratio. Either must live
// while at least 1/kSharedSpan of the forward's activation bytes are made: many blocks read it,
// not the two ends of one block (a residual, whose sharing would cut inside the block).
constexpr std::array<int64_t, 4> kShareRatios = {1024, 256, 64, 16};
constexpr int64_t kFromInputsRatio = 4;
constexpr int64_t kSharedSpan = 4;

std::string where(const Graph& g) {
  return g.name().empty() ? std::string("graph") : fmt::format("graph '{}'", g.name());
}

// Keeps at most `max_cuts` of `cuts`, at about equal forward cost apart.
std::vector<int32_t> thin_cuts(const Graph& g, std::span<const NodeId> forward,
                               std::vector<int32_t> cuts, int32_t max_cuts) {
  if (static_cast<int32_t>(cuts.size()) <= max_cuts) return cuts;
  std::vector<double> prefix(forward.size() + 1, 0);
  for (size_t i = 0; i < forward.size(); ++i) prefix[i + 1] = prefix[i] + g.node(forward[i]).cost;
  const double total = prefix.back();
  std::vector<int32_t> kept;
  const double step = total / (max_cuts + 1);
  double next = step;
  for (size_t c = 0; c < cuts.size() && static_cast<int32_t>(kept.size()) < max_cuts; ++c) {
    const double at = prefix[static_cast<size_t>(cuts[c]) + 1];
    // Equal cost when costs allow; else equal node counts (all-zero costs).
    const bool by_cost = total > 0;
    const double mark = by_cost ? at : static_cast<double>(cuts[c] + 1);
    const double goal = by_cost ? next
                                : static_cast<double>(kept.size() + 1) *
                                      static_cast<double>(forward.size()) / (max_cuts + 1);
    if (mark >= goal) {
      kept.push_back(cuts[c]);
      next += step;
    }
  }
  return kept;
}

// Peak of (live bytes + temp) while `nodes` run in order (the simulator rule of docs/design.md §1
// on a segment): `initial` values are live at the start; each counted value lives until its last
// read in the segment, or to the end when `keep` says so.
template <class Counted, class Keep>
int64_t segment_peak(const Graph& g, std::span<const NodeId> nodes,
                     std::span<const ValueId> initial, const Counted& counted, const Keep& keep,
                     IdVector<ValueId, int32_t>& last_use) {
  const auto steps = static_cast<int32_t>(nodes.size());
  for (ValueId v : initial) last_use[v] = kNone;
  for (int32_t t = 0; t < steps; ++t) {
    const Node& n = g.node(nodes[static_cast<size_t>(t)]);
    for (ValueId v : n.outputs) last_use[v] = kNone;
  }
  for (int32_t t = 0; t < steps; ++t)
    for (ValueId v : g.node(nodes[static_cast<size_t>(t)]).inputs) last_use[v] = t;
  std::vector<int64_t> freed(static_cast<size_t>(steps) + 1, 0);  // bytes released after step t
  int64_t live = 0;
  auto schedule_release = [&](ValueId v, int32_t produced) {
    if (keep(v)) return;
    const int32_t end = std::max(last_use[v], produced);
    freed[static_cast<size_t>(std::max(end, 0))] += g.value(v).size_bytes;
  };
  for (ValueId v : initial) {
    if (!counted(v)) continue;
    live += g.value(v).size_bytes;
    schedule_release(v, 0);
  }
  int64_t peak = live;
  for (int32_t t = 0; t < steps; ++t) {
    const Node& n = g.node(nodes[static_cast<size_t>(t)]);
    for (ValueId y : n.outputs) {
      if (!counted(y)) continue;
      live += g.value(y).size_bytes;
      schedule_release(y, t);
    }
    peak = std::max(peak, live + n.temp_bytes);
    live -= freed[static_cast<size_t>(t)];
  }
  return peak;
}

class Extractor {
 public:
  Extractor(const Graph& g, const ChainExtractOptions& options) : g_(g), options_(options) {}

  GraphChain run() {
    split_phases();
    find_helpers();
    index_core();
    // A backward node that must run in a later stage than a forward value it reads allows (it
    // reads a value that crosses no cut, and one of a later stage: the loss's token count beside
    // a log-softmax its fused group reads only inside itself) merges those stages: their cuts
    // are dropped and the stages found again. Graphs without such a node are found once.
    for (;;) {
      out_.stage_of.assign(static_cast<size_t>(g_.num_nodes()), 0);
      out_.stages.clear();
      out_.separators.clear();
      find_stages();
      const std::optional<StageConflict> conflict = assign_backward();
      if (!conflict) break;
      drop_cuts(*conflict);
    }
    size_stages();
    return std::move(out_);
  }

 private:
  using ValueFlags = IdVector<ValueId, uint8_t>;
  // A run of core positions [begin, begin + size): the forward nodes of one stage.
  struct Span {
    int32_t begin = 0, size = 0;
  };

  int32_t num_stages() const { return static_cast<int32_t>(out_.stages.size()); }
  int32_t num_core() const { return static_cast<int32_t>(core_.size()); }
  // Made by a forward node that is not a helper (a helper's outputs are backward values here).
  bool forward_value(ValueId v) const {
    if (g_.is_graph_input(v)) return false;
    const NodeId p = g_.producer(v);
    return g_.node(p).phase == Phase::kForward && !out_.backward_helper[p];
  }
  bool backward_work(NodeId n) const {
    return g_.node(n).phase == Phase::kBackward || out_.backward_helper[n];
  }
  ValueFlags no_values() const { return ValueFlags(static_cast<size_t>(g_.num_values()), 0); }

  void split_phases() {
    if (options_.max_stages < 2)
      throw InputError(
          fmt::format("chain: max_stages must be at least 2 (got {})", options_.max_stages));
    for (const Node& n : g_.nodes())
      if (n.phase == Phase::kUnknown)
        throw UnsupportedGraph(fmt::format(
            "{} has no chain structure: node '{}' has no phase (chain extraction needs a joint "
            "training graph with every node marked forward or backward)",
            where(g_), n.name));
    for (int32_t i = 0; i < g_.num_nodes(); ++i) {
      const NodeId n{i};
      (g_.node(n).phase == Phase::kForward ? forward_ : backward_).push_back(n);
    }
    if (forward_.empty() || backward_.empty())
      throw UnsupportedGraph(fmt::format("{} has no chain structure: it has no {} nodes", where(g_),
                                         forward_.empty() ? "forward" : "backward"));
    for (NodeId n : forward_)
      for (ValueId v : g_.node(n).inputs)
        if (!g_.is_graph_input(v) && g_.node(g_.producer(v)).phase != Phase::kForward)
          throw UnsupportedGraph(fmt::format("{}: forward {} reads backward {}", where(g_),
                                             g_.describe(n), g_.describe(v)));
  }

  // Backward helpers: recomputable forward nodes whose users are all backward nodes or other
  // helpers, and whose outputs are no graph outputs: work for the backward that a tracer setting
  // phases by data flow puts in the forward (the transposed activations and weights a backward
  // reads, a power of an input for its derivative). They run with their users, in the backward
  // of the stage whose values they read, and read nothing for the forward: whichever tracer
  // placed them, they do not change the cuts. The backward list becomes the helpers, then the
  // backward nodes, each in graph order (helpers read only forward values and other helpers).
  // Where the forward's result is no graph output (MOCCASIN's graphs: the loss feeds only the
  // backward), the rule makes the loss a helper, and then every node before it: the forward's last
  // node then stays in the forward.
  void find_helpers() {
    std::vector<NodeId> helpers = mark_helpers(kNoNode);
    if (helpers.size() == forward_.size()) helpers = mark_helpers(forward_.back());
    backward_.insert(backward_.begin(), helpers.rbegin(), helpers.rend());
  }

  // The helpers, last first, with `pinned` kept in the forward.
  std::vector<NodeId> mark_helpers(NodeId pinned) {
    out_.backward_helper.assign(static_cast<size_t>(g_.num_nodes()), 0);
    std::vector<NodeId> helpers;
    for (auto it = forward_.rbegin(); it != forward_.rend(); ++it) {
      const Node& node = g_.node(*it);
      if (*it == pinned || !node.recomputable || node.outputs.empty()) continue;
      bool only_helps = true, used = false;
      for (ValueId y : node.outputs) {
        only_helps &= !g_.value(y).is_output;
        for (NodeId u : g_.users(y)) {
          used = true;
          only_helps &= backward_work(u);
        }
      }
      if (!only_helps || !used) continue;
      out_.backward_helper[*it] = 1;
      helpers.push_back(*it);
    }
    return helpers;
  }

  // The other forward nodes (the core), their last forward reads and the activation bytes made.
  void index_core() {
    core_pos_.assign(static_cast<size_t>(g_.num_nodes()), kNone);
    for (NodeId n : forward_)
      if (!out_.backward_helper[n]) {
        core_pos_[n] = num_core();
        core_.push_back(n);
      }
    // from_inputs_[i]: core position i, no matrix product, reads graph inputs and values made
    // from them alone without one.
    from_inputs_.assign(core_.size(), 1);
    for (size_t i = 0; i < core_.size(); ++i) {
      if (g_.node(core_[i]).kind == OpKind::kCompute) from_inputs_[i] = 0;
      for (ValueId v : g_.node(core_[i]).inputs)
        if (!g_.is_graph_input(v) && !from_inputs_[static_cast<size_t>(core_pos_[g_.producer(v)])])
          from_inputs_[i] = 0;
    }
    last_forward_use_.assign(static_cast<size_t>(g_.num_values()), kNone);
    for (int32_t i = 0; i < num_core(); ++i)
      for (ValueId v : g_.node(core_[static_cast<size_t>(i)]).inputs)
        if (!g_.is_graph_input(v)) last_forward_use_[v] = i;
    // made_before_[i]: bytes of the values made at core positions < i that a backward node reads.
    made_before_.assign(core_.size() + 1, 0);
    for (size_t i = 0; i < core_.size(); ++i) {
      int64_t made = 0;
      for (ValueId y : g_.node(core_[i]).outputs)
        if (g_.value(y).size_bytes > 0 && !g_.value(y).is_output && backward_reads(y))
          made += g_.value(y).size_bytes;
      made_before_[i + 1] = made_before_[i] + made;
    }
  }

  bool backward_reads(ValueId v) const {
    for (NodeId u : g_.users(v))
      if (backward_work(u)) return true;
    return false;
  }

  // Core positions after which the forward is cut by one node: no value produced before the
  // position is read after it (graph inputs, size-0 values — aliases, whose users also read the
  // root, and effect tokens — and `exempt` values aside; parameters, so a tied embedding does
  // not join everything). O(V + E). Only cuts whose crossing values some backward node reads are
  // kept: Rotor's model keeps a^ℓ (inside ā^ℓ) until B^ℓ, which over-counts an activation no
  // backward node needs (the input of a ReLU, say), and such a cut offers no useful checkpoint
  // the next one does not; `any_crossing` keeps them too (below). `blocker`, when given, gets per
  // position the value produced before it and read farthest after it (kNoValue when none
  // crosses).
  std::vector<int32_t> cut_positions(const ValueFlags& exempt,
                                     std::vector<ValueId>* blocker = nullptr,
                                     bool any_crossing = false) const {
    std::vector<int32_t> cuts;
    int32_t reach = kNone;  // the last forward read of any value produced before position i
    ValueId reach_value = kNoValue;
    if (blocker) blocker->assign(core_.size(), kNoValue);
    for (int32_t i = 0; i < num_core(); ++i) {
      const Node& node = g_.node(core_[static_cast<size_t>(i)]);
      if (blocker && reach > i) (*blocker)[static_cast<size_t>(i)] = reach_value;
      if (reach <= i && i + 1 < num_core()) {
        bool crossing_read = false;
        for (ValueId y : node.outputs)
          if (g_.value(y).size_bytes > 0 && last_forward_use_[y] > i)
            crossing_read |= any_crossing || backward_reads(y);
        if (crossing_read) cuts.push_back(i);
      }
      for (ValueId y : node.outputs)
        if (g_.value(y).size_bytes > 0 && !exempt[y] && last_forward_use_[y] > reach)
          reach = last_forward_use_[y], reach_value = y;
    }
    return cuts;
  }

  Span largest_stage(std::span<const int32_t> cuts) const {
    Span best;
    int32_t begin = 0;
    for (size_t k = 0; k <= cuts.size(); ++k) {
      const int32_t end = k < cuts.size() ? cuts[k] + 1 : num_core();
      if (end - begin > best.size) best = {begin, end - begin};
      begin = end;
    }
    return best;
  }

  // No cut, or one stage holding most of the forward.
  bool coarse(std::span<const int32_t> cuts) const {
    return cuts.empty() || 2 * largest_stage(cuts).size > num_core();
  }

  // Bytes of the activations made from the position after v's production to its last forward
  // read (its forward lifetime).
  int64_t made_while_live(ValueId v) const {
    const int32_t p = core_pos_[g_.producer(v)];
    const int32_t q = last_forward_use_[v];
    return q > p
               ? made_before_[static_cast<size_t>(q) + 1] - made_before_[static_cast<size_t>(p) + 1]
               : 0;
  }

  // Forward values that may cross cuts at `ratio`: sized, not graph outputs, living while at
  // least 1/kSharedSpan of the forward's activations are made, and at most 1/ratio of those
  // made while they live (1/kFromInputsRatio, made from graph inputs alone); always_shared values
  // at any size.
  ValueFlags share_candidates(int64_t ratio) const {
    ValueFlags candidates = always_shared_values();
    const int64_t span = made_before_.back() / kSharedSpan;
    for (int32_t i = 0; i < num_core(); ++i) {
      const int64_t r =
          from_inputs_[static_cast<size_t>(i)] ? std::min(ratio, kFromInputsRatio) : ratio;
      for (ValueId y : g_.node(core_[static_cast<size_t>(i)]).outputs) {
        const int64_t size = g_.value(y).size_bytes, made = made_while_live(y);
        if (size > 0 && !g_.value(y).is_output && made >= span && size <= made / r)
          candidates[y] = 1;
      }
    }
    return candidates;
  }

  // The values that may cross cuts at any ratio, cuts or no cuts.
  ValueFlags always_shared_values() const {
    ValueFlags values = no_values();
    for (int32_t i = 0; i < num_core(); ++i)
      for (ValueId y : g_.node(core_[static_cast<size_t>(i)]).outputs)
        if (g_.value(y).size_bytes > 0 && !g_.value(y).is_output && always_shared(i, y))
          values[y] = 1;
    return values;
  }

  bool always_shared(int32_t i, ValueId y) const {
    return always_live(i, y) || late_constant(i, y);
  }

  // Value y of core position i is a constant (its node reads nothing), a backward node reads it,
  // and it is at most 1/kShareRatios[0] of the forward's activations: a scalar that the loss
  // makes and a batch norm's gradient in the first block reads (common subexpressions merged).
  // Made first and kept resident, it binds no backward node to the last stage.
  bool late_constant(int32_t i, ValueId y) const {
    return g_.node(core_[static_cast<size_t>(i)]).inputs.empty() && backward_reads(y) &&
           g_.value(y).size_bytes <= made_before_.back() / kShareRatios[0];
  }

  // Value y of core position i is made from graph inputs alone by a node no plan runs again
  // (channels-last copies of weights that a compiler makes before the forward's first kernel),
  // and the backward reads it: every plan keeps it from its making to that read, across the
  // forward's end, so keeping it resident across blocks costs no plan anything there.
  bool always_live(int32_t i, ValueId y) const {
    return from_inputs_[static_cast<size_t>(i)] &&
           !g_.node(core_[static_cast<size_t>(i)]).recomputable && backward_reads(y);
  }

  // Why `cuts` leave most of the forward in one stage: the value crossing most of its positions.
  std::string why_coarse(std::span<const int32_t> cuts, const ValueFlags& exempt) const {
    std::vector<ValueId> blocker;
    (void)cut_positions(exempt, &blocker);
    const Span s = largest_stage(cuts);
    IdVector<ValueId, int32_t> crossed(static_cast<size_t>(g_.num_values()), 0);
    ValueId worst = kNoValue;
    for (int32_t i = s.begin; i + 1 < s.begin + s.size; ++i) {
      const ValueId v = blocker[static_cast<size_t>(i)];
      if (!v.valid()) continue;
      if (++crossed[v] > (worst.valid() ? crossed[worst] : 0)) worst = v;
    }
    const std::string stage =
        fmt::format("{} of the {} forward nodes are one stage, from '{}' to '{}'", s.size,
                    num_core(), g_.node(core_[static_cast<size_t>(s.begin)]).name,
                    g_.node(core_[static_cast<size_t>(s.begin + s.size - 1)]).name);
    if (!worst.valid())
      return stage +
             ": no value crosses its positions, but no value handed on at any of them is "
             "read by the backward";
    const Value& value = g_.value(worst);
    const int64_t made = made_while_live(worst);
    const std::string share =
        made / kShareRatios.back() >= value.size_bytes
            ? fmt::format(
                  "keeping the values up to 1/{} of the activations made while they live "
                  "resident did not split the stage",
                  kShareRatios.back())
            : fmt::format(
                  "it is too large to keep resident across blocks ({} of activations are "
                  "made while it lives; the limit is 1/{} of them)",
                  format_bytes(made), kShareRatios.back());
    return fmt::format(
        "{}: value '{}' ({}, made by '{}', last read by forward node '{}') crosses {} of the "
        "stage's {} positions; {}",
        stage, value.name, format_bytes(value.size_bytes), g_.node(g_.producer(worst)).name,
        g_.node(core_[static_cast<size_t>(last_forward_use_[worst])]).name, crossed[worst],
        s.size - 1, share);
  }

  // The exempt values that cross one of `cuts` are shared, and the late constants made after the
  // first cut (a lower stage's backward may read them).
  void share_crossing(std::span<const int32_t> cuts, const ValueFlags& exempt) {
    out_.shared = no_values();
    for (int32_t i = 0; i < num_core(); ++i)
      for (ValueId y : g_.node(core_[static_cast<size_t>(i)]).outputs) {
        if (!exempt[y]) continue;
        const auto next = std::upper_bound(cuts.begin(), cuts.end(), i);
        out_.shared[y] = (next != cuts.end() && *next < last_forward_use_[y]) ||
                         (!cuts.empty() && i > cuts.front() && late_constant(i, y));
      }
  }

  // Core position i hands on a value that is not shared and that the backward reads (any, with
  // cuts at any crossing value: find_stages).
  bool hands_on_activation(int32_t i) const {
    for (ValueId y : g_.node(core_[static_cast<size_t>(i)]).outputs)
      if (g_.value(y).size_bytes > 0 && !out_.shared[y] && last_forward_use_[y] > i &&
          (any_crossing_ || backward_reads(y)))
        return true;
    return false;
  }

  // Forward work that makes shared values from graph inputs alone (a causal mask, rotary tables,
  // position ids, a relative position bias), with the values only it reads: where a model builds
  // it (in its first layer, between the embedding and the first layer, or in the first
  // cross-attention) it would make that block unlike the others of its kind. These are the core
  // nodes, none a separator, that read only graph inputs and each other's values, each value of
  // which is shared (or a view of a shared value) or read in the forward by such nodes alone. They
  // run first, at the start of stage 1: they need nothing the forward makes, and their shared
  // values are resident anyway. Returns per core position whether it is one (none without shared
  // values).
  ValueId alias_root(ValueId v) const {
    while (g_.value(v).alias_of.valid()) v = g_.value(v).alias_of;
    return v;
  }

  std::vector<uint8_t> hoisted_nodes(std::span<const int32_t> cuts) const {
    const auto m = static_cast<size_t>(num_core());
    std::vector<uint8_t> in(m, 0);
    if (std::find(out_.shared.begin(), out_.shared.end(), 1) == out_.shared.end()) return in;
    std::fill(in.begin(), in.end(), 1);
    for (const int32_t c : cuts) in[static_cast<size_t>(c)] = 0;
    // Drop nodes reading a forward value made outside the set, and nodes whose unshared values
    // other forward nodes read, until neither is left.
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < m; ++i) {
        if (!in[i]) continue;
        for (ValueId v : g_.node(core_[i]).inputs)
          if (!g_.is_graph_input(v) && !in[static_cast<size_t>(core_pos_[g_.producer(v)])]) {
            in[i] = 0, changed = true;
            break;
          }
      }
      for (size_t i = m; i-- > 0;) {
        if (!in[i]) continue;
        for (ValueId y : g_.node(core_[i]).outputs) {
          if (out_.shared[alias_root(y)]) continue;  // a shared value or a view of one
          for (NodeId u : g_.users(y))
            if (core_pos_[u] != kNone && !in[static_cast<size_t>(core_pos_[u])])
              in[i] = 0, changed = true;
        }
      }
    }
    return in;
  }

  // Cuts, then shared values when the cuts alone leave the chain coarse: at the first ratio that
  // does not, the candidates that cross a kept cut. When no ratio helps, the same with cuts whose
  // crossing values no backward node reads: a pre-norm transformer whose norm reads an fp32 copy
  // of the residual (Hugging Face's Llama in bf16) hands on, between layers, only the bf16
  // residual, which its backward never reads; Rotor's model then over-counts that value, far less
  // than one stage holding every layer costs.
  void find_stages() {
    ValueFlags exempt = always_shared_values();
    std::vector<int32_t> cuts = cut_positions(exempt);
    for (const bool any_crossing : {false, true}) {
      if (!coarse(cuts)) break;
      for (const int64_t ratio : kShareRatios) {
        ValueFlags candidates = share_candidates(ratio);
        std::vector<int32_t> shared_cuts = cut_positions(candidates, nullptr, any_crossing);
        if (coarse(shared_cuts)) continue;
        cuts = std::move(shared_cuts);
        exempt = std::move(candidates);
        any_crossing_ = any_crossing;
        break;
      }
    }
    out_.separator_candidates = static_cast<int32_t>(cuts.size());
    if (cuts.empty())
      throw UnsupportedGraph(fmt::format(
          "{} has no chain structure: fewer than 2 stages (no forward node separates the forward "
          "graph: {})",
          where(g_), why_coarse(cuts, exempt)));
    if (coarse(cuts) && num_core() > kNoteForwardNodes) out_.note = why_coarse(cuts, exempt);
    cuts = thin_cuts(g_, core_, std::move(cuts), options_.max_stages - 1);
    share_crossing(cuts, exempt);
    // A cut that hands on only shared values (after the mask is made, say) is no checkpoint.
    std::vector<int32_t> useful;
    for (const int32_t i : cuts)
      if (hands_on_activation(i)) useful.push_back(i);
    if (!useful.empty() && useful.size() < cuts.size()) {
      cuts = std::move(useful);
      share_crossing(cuts, exempt);
    }
    if (!dropped_cuts_.empty()) {
      std::erase_if(cuts, [&](int32_t c) {
        return std::find(dropped_cuts_.begin(), dropped_cuts_.end(), c) != dropped_cuts_.end();
      });
      share_crossing(cuts, exempt);
    }
    cuts_ = cuts;
    out_.stages.resize(cuts.size() + 1);
    output_stage_.assign(static_cast<size_t>(g_.num_values()), 0);
    const std::vector<uint8_t> hoisted = hoisted_nodes(cuts);
    for (int32_t i = 0; i < num_core(); ++i)
      if (hoisted[static_cast<size_t>(i)]) {
        const NodeId n = core_[static_cast<size_t>(i)];
        out_.stages[0].forward.push_back(n);
        out_.stage_of[n] = 1;
      }
    size_t stage = 0;
    for (int32_t i = 0; i < num_core(); ++i) {
      const NodeId n = core_[static_cast<size_t>(i)];
      if (!hoisted[static_cast<size_t>(i)]) {
        out_.stages[stage].forward.push_back(n);
        out_.stage_of[n] = static_cast<int32_t>(stage) + 1;
      }
      if (stage < cuts.size() && i == cuts[stage]) {
        out_.separators.push_back(n);
        for (ValueId y : g_.node(n).outputs)
          if (g_.value(y).size_bytes > 0 && last_forward_use_[y] > i && !out_.shared[y]) {
            out_.stages[stage].output.push_back(y);
            output_stage_[y] = static_cast<int32_t>(stage) + 1;
          }
        ++stage;
      }
    }
  }

  // Stages a backward node may run in, from the forward values it reads: a stage's own values
  // only in its backward, a separator output also in the next stage's backward.
  void forward_bounds(NodeId n, int32_t& lo, int32_t& hi, NodeId& hi_reason) const {
    lo = 0;  // 0: no forward constraint
    hi = num_stages();
    for (ValueId v : g_.node(n).inputs) {
      if (g_.is_graph_input(v) || !forward_value(v)) continue;
      // Size 0: made before any backward node; shared or a graph output (a buffer's update):
      // resident.
      if (g_.value(v).size_bytes == 0 || out_.shared[v] || g_.value(v).is_output) continue;
      const NodeId p = g_.producer(v);
      const int32_t s = out_.stage_of[p];
      const int32_t top = output_stage_[v] == s ? s + 1 : s;
      lo = std::max(lo, s);
      if (top < hi) hi = top, hi_reason = p;
    }
  }

  // A backward node that must run in stage `low` or later but by stage `cap` (< low).
  struct StageConflict {
    int32_t cap = 0, low = 0;
    std::string message;
  };

  // Drops the cuts between stages conflict.cap and conflict.low (merging them); with no cut left
  // to drop, the conflict is the graph's error.
  void drop_cuts(const StageConflict& conflict) {
    const auto first = static_cast<size_t>(conflict.cap) - 1;  // the cut after stage cap
    const auto last = static_cast<size_t>(conflict.low) - 1;   // the cut before stage low
    // Merging every stage leaves no chain.
    if (conflict.cap < 1 || last > cuts_.size() || first >= last || last - first == cuts_.size())
      throw UnsupportedGraph(conflict.message);
    for (size_t k = first; k < last; ++k) dropped_cuts_.push_back(cuts_[k]);
  }

  // Each backward node runs in the lowest stage its forward reads and its users allow, so the
  // gradient of a stage's input is computed in that stage and only small values cross a
  // boundary; a node no stage binds (a bias gradient's sum, a constant) runs right after its
  // inputs, or just before its first user. A node no stage allows is returned (run() merges
  // the stages between), with the stages left half assigned.
  std::optional<StageConflict> assign_backward() {
    const auto nodes = static_cast<size_t>(g_.num_nodes());
    IdVector<NodeId, int32_t> low(nodes, 0);  // 0: floating
    for (auto it = backward_.rbegin(); it != backward_.rend(); ++it) {
      const NodeId n = *it;
      int32_t lo = 0, hi = 0;
      NodeId reason = kNoNode;
      forward_bounds(n, lo, hi, reason);
      for (ValueId y : g_.node(n).outputs)
        for (NodeId u : g_.users(y)) lo = std::max(lo, low[u]);
      low[n] = lo;
    }
    IdVector<NodeId, uint8_t> floating(nodes, 0);
    for (NodeId n : backward_) {
      int32_t lo = 0, cap = 0;
      NodeId cap_reason = kNoNode;
      forward_bounds(n, lo, cap, cap_reason);
      for (ValueId v : g_.node(n).inputs) {
        if (g_.is_graph_input(v) || forward_value(v)) continue;
        const NodeId p = g_.producer(v);
        if (out_.stage_of[p] < cap) cap = out_.stage_of[p], cap_reason = p;
      }
      if (low[n] > cap)
        return StageConflict{
            cap, low[n],
            fmt::format("{} has no usable chain structure: backward {} must run in stage {} or "
                        "later (the stages of the activations it or its users read) but by stage "
                        "{} ({})",
                        where(g_), g_.describe(n), low[n], cap,
                        cap_reason.valid() ? g_.describe(cap_reason) : std::string("-"))};
      // Reads backward values but no forward one (a sum of gradients). A view of them (free; its
      // root is read where its users run) and a node that reads only graph inputs (a view of a
      // weight, a constant) go with their users instead.
      floating[n] = lo == 0 && cap_reason.valid() && makes_bytes(n);
      // floating_late: reading graph inputs only, it waits for its users (settle_late).
      const bool late = options_.floating_late && (floating[n] || (lo == 0 && !cap_reason.valid()));
      out_.stage_of[n] = late || low[n] == 0 ? cap : low[n];
    }
    if (options_.floating_late) settle_late(low, floating);
    for (NodeId n : backward_)
      out_.stages[static_cast<size_t>(out_.stage_of[n]) - 1].backward.push_back(n);
    return std::nullopt;
  }

  bool makes_bytes(NodeId n) const {
    for (ValueId y : g_.node(n).outputs)
      if (g_.value(y).size_bytes > 0) return true;
    return false;
  }

  // Where floating_late puts the backward nodes no forward value binds, users first: a gradient
  // sum (floating) and the work that nothing after it binds either (`low` 0: the gradients of the
  // weights of an embedding or a patch convolution, whose input is a graph input, and the bias
  // gradients). Each goes as low as its users allow but no lower than the lowest stage that
  // already reads each of its sized inputs: the sum of a layer input's gradients stays in the
  // layer whose backward made them, a reduction of that sum for a weight (a position
  // embedding's gradient) goes to the block that reads the sum anyway, with no extra crossing
  // either way. A view goes with its users. Unbound work that reads graph inputs goes to the
  // first stage whose forward reads them, or with the unbound node it reads that
  // does (a tied embedding's gradient sum follows the embedding's gradient): with the block it
  // differentiates rather than in the one above.
  void settle_late(const IdVector<NodeId, int32_t>& low,
                   const IdVector<NodeId, uint8_t>& floating) {
    const auto values = static_cast<size_t>(g_.num_values());
    IdVector<ValueId, int32_t> input_stage(values, 0);
    for (NodeId n : core_)
      for (ValueId v : g_.node(n).inputs)
        if (g_.is_graph_input(v) && input_stage[v] == 0) input_stage[v] = out_.stage_of[n];
    IdVector<NodeId, int32_t> anchor(static_cast<size_t>(g_.num_nodes()), 0);
    for (NodeId n : backward_) {
      if (low[n] != 0) continue;
      int32_t own = 0, inherited = 0;
      for (ValueId v : g_.node(n).inputs) {
        if (g_.is_graph_input(v))
          own = std::max(own, input_stage[v]);
        else if (low[g_.producer(v)] == 0 && !forward_value(v))
          inherited = std::max(inherited, anchor[g_.producer(v)]);
      }
      anchor[n] = own > 0 ? own : inherited;
    }
    for (auto it = backward_.rbegin(); it != backward_.rend(); ++it) {
      const NodeId n = *it;
      int32_t floor = 0, reach = 0;
      bool reads_backward = false;
      for (ValueId y : g_.node(n).outputs)
        for (NodeId u : g_.users(y)) floor = std::max(floor, out_.stage_of[u]);
      for (ValueId v : g_.node(n).inputs) {
        if (g_.is_graph_input(v) || forward_value(v)) continue;
        reads_backward = true;
        if (g_.value(v).size_bytes == 0) continue;  // free: its root is read too
        int32_t lowest = out_.stage_of[g_.producer(v)];
        for (NodeId u : g_.users(v))
          if (u != n) lowest = std::min(lowest, out_.stage_of[u]);
        reach = std::max(reach, lowest);
      }
      // Reads graph inputs and resident values only (a constant, a view of a weight): with its
      // users.
      if (!reads_backward && low[n] != 0) {
        if (floor > 0) out_.stage_of[n] = floor;
        continue;
      }
      if (low[n] != 0 && !floating[n]) continue;
      // A view goes with its users; without users it stays.
      const int32_t target = !makes_bytes(n) ? (floor > 0 ? floor : out_.stage_of[n])
                             : anchor[n] > 0 ? anchor[n]
                             : reach > 0     ? reach
                                             : out_.stage_of[n];
      out_.stage_of[n] = std::min(std::max(target, std::max(floor, 1)), out_.stage_of[n]);
    }
  }

  void size_stages() {
    const int32_t last = num_stages();
    const auto stages = static_cast<size_t>(last);
    const auto values = static_cast<size_t>(g_.num_values());
    // Values outside the chain's accounting: constants of the run, or added as overheads.
    std::vector<int64_t> kept_once(stages + 2, 0);  // R_s: non-recomputable forward outputs
    std::vector<int64_t> grads(stages + 2, 0);      // G_s: graph outputs of B^s
    for (ValueId v : g_.graph_inputs()) out_.resident_bytes += g_.value(v).size_bytes;
    IdVector<ValueId, uint8_t> counted(values, 0);
    for (int32_t i = 0; i < g_.num_values(); ++i) {
      const ValueId v{i};
      const Value& value = g_.value(v);
      if (g_.is_graph_input(v) || value.size_bytes == 0) continue;
      const NodeId p = g_.producer(v);
      const auto s = static_cast<size_t>(out_.stage_of[p]);
      if (forward_value(v)) {
        if (value.is_output || out_.shared[v])
          out_.resident_bytes += value.size_bytes;
        else if (!g_.node(p).recomputable)
          kept_once[s] += value.size_bytes;
        else
          counted[v] = 1;
      } else {
        if (value.is_output) grads[s] += value.size_bytes;
        counted[v] = 1;  // a backward output is kept to the end of its stage's run
      }
    }
    // ā^ℓ: the stage values its backward reads.
    IdVector<ValueId, int32_t> saved_stage(values, 0);
    for (NodeId n : backward_)
      for (ValueId v : g_.node(n).inputs)
        if (counted[v] && forward_value(v) && out_.stage_of[g_.producer(v)] == out_.stage_of[n] &&
            output_stage_[v] == 0 && saved_stage[v] == 0) {
          saved_stage[v] = out_.stage_of[n];
          out_.stages[static_cast<size_t>(out_.stage_of[n]) - 1].saved.push_back(v);
        }
    // δ: backward values crossing from B^{ℓ+1} to B^ℓ, for every boundary they cross.
    IdVector<ValueId, int32_t> lowest_user(values, 0);
    std::vector<int64_t> delta_diff(stages + 2, 0);
    std::vector<std::vector<ValueId>> delta_in(stages + 1);  // by stage: values crossing into it
    for (NodeId n : backward_)
      for (ValueId y : g_.node(n).outputs) {
        if (!counted[y] || g_.value(y).is_output) continue;
        int32_t lowest = out_.stage_of[n];
        for (NodeId u : g_.users(y)) lowest = std::min(lowest, out_.stage_of[u]);
        lowest_user[y] = lowest;
        for (int32_t j = lowest; j < out_.stage_of[n]; ++j)
          delta_in[static_cast<size_t>(j)].push_back(y);
        delta_diff[static_cast<size_t>(lowest)] += g_.value(y).size_bytes;
        delta_diff[static_cast<size_t>(out_.stage_of[n])] -= g_.value(y).size_bytes;
      }
    std::vector<int64_t> delta(stages + 1, 0);  // δ^j, j = 0..L+1 (0 and L+1 stay 0)
    int64_t running = 0;
    for (size_t j = 1; j <= stages; ++j) {
      running += delta_diff[j];
      delta[j] = running;
    }
    auto bytes_of = [&](std::span<const ValueId> vs) {
      int64_t sum = 0;
      for (ValueId v : vs)
        if (counted[v]) sum += g_.value(v).size_bytes;
      return sum;
    };
    std::vector<int64_t> kept_through(stages + 2, 0);  // Σ_{s≤ℓ} R_s
    std::vector<int64_t> grads_after(stages + 2, 0);   // Σ_{s>ℓ} G_s
    for (size_t s = 1; s <= stages; ++s) kept_through[s] = kept_through[s - 1] + kept_once[s];
    for (size_t s = stages; s >= 1; --s) grads_after[s - 1] = grads_after[s] + grads[s];

    IdVector<ValueId, int32_t> scratch(values, kNone);
    out_.chain.name = g_.name();
    out_.chain.stages.resize(stages);
    for (size_t i = 0; i < stages; ++i) {
      const auto l = static_cast<int32_t>(i) + 1;
      StageNodes& nodes = out_.stages[i];
      ChainStage& stage = out_.chain.stages[i];
      stage.name = i + 1 < stages ? fmt::format("to {}", g_.node(out_.separators[i]).name)
                                  : std::string("loss");
      for (NodeId n : nodes.forward) {
        if (g_.node(n).recomputable)
          stage.u_f += g_.node(n).cost;
        else
          out_.fixed_cost += g_.node(n).cost;
      }
      for (NodeId n : nodes.backward) stage.u_b += g_.node(n).cost;
      const std::span<const ValueId> input =
          i > 0 ? std::span<const ValueId>(out_.stages[i - 1].output) : std::span<const ValueId>{};
      const int64_t a_in = bytes_of(input);
      const int64_t a = bytes_of(nodes.output);
      const int64_t abar = a + bytes_of(nodes.saved);
      stage.sizes = {.a = a, .abar = abar, .delta = delta[i + 1]};
      auto is_counted = [&](ValueId v) { return counted[v] != 0; };
      auto is_input = [&](ValueId v) { return output_stage_[v] == l - 1 && l > 1; };
      auto keep_all = [&](ValueId v) {
        return is_input(v) || output_stage_[v] == l || saved_stage[v] == l;
      };
      auto keep_output = [&](ValueId v) { return is_input(v) || output_stage_[v] == l; };
      const int64_t peak_all =
          segment_peak(g_, nodes.forward, input, is_counted, keep_all, scratch);
      const int64_t peak_ck =
          segment_peak(g_, nodes.forward, input, is_counted, keep_output, scratch);
      const int64_t extra = kept_through[i + 1] + grads_after[i + 1];
      stage.o_f = std::max<int64_t>({peak_all - abar - a_in, peak_ck - a - a_in, 0}) + extra;

      std::vector<ValueId> backward_initial(input.begin(), input.end());
      for (ValueId v : nodes.output) backward_initial.push_back(v);
      for (ValueId v : nodes.saved) backward_initial.push_back(v);
      for (ValueId v : delta_in[i + 1]) backward_initial.push_back(v);
      auto keep_backward = [&](ValueId v) {
        if (is_input(v)) return true;  // B^ℓ is charged a^{ℓ-1} throughout
        if (!forward_value(v)) return g_.value(v).is_output || lowest_user[v] < l;
        return false;
      };
      const int64_t peak_b =
          segment_peak(g_, nodes.backward, backward_initial, is_counted, keep_backward, scratch);
      stage.o_b = std::max<int64_t>(peak_b - abar - a_in - delta[i + 1] - delta[i], 0) + extra;
    }
  }

  const Graph& g_;
  const ChainExtractOptions options_;
  std::vector<NodeId> forward_, backward_;
  std::vector<NodeId> core_;                     // the other forward nodes, in graph order
  IdVector<NodeId, int32_t> core_pos_;           // position in core_, kNone for the rest
  IdVector<ValueId, int32_t> last_forward_use_;  // core position of the last core read
  std::vector<int64_t> made_before_;             // activation bytes made before each core position
  std::vector<uint8_t> from_inputs_;             // by core position: made from graph inputs alone
  IdVector<ValueId, int32_t> output_stage_;      // ℓ when the value is in a^ℓ, else 0
  bool any_crossing_ = false;                    // cuts at values no backward reads (find_stages)
  std::vector<int32_t> cuts_;                    // the core positions the stages end at
  std::vector<int32_t> dropped_cuts_;            // cuts merged away (run, drop_cuts)
  GraphChain out_;
};

}  // namespace

GraphChain extract_chain(const Graph& graph, const ChainExtractOptions& options) {
  return Extractor(graph, options).run();
}

std::vector<StageRun> store_all_runs(const GraphChain& chain) {
  std::vector<StageRun> runs;
  const auto stages = static_cast<int32_t>(chain.stages.size());
  for (int32_t l = 1; l <= stages; ++l) runs.push_back({l, false});
  for (int32_t l = stages; l >= 1; --l) runs.push_back({l, true});
  return runs;
}

Sequence lower_chain_plan(const Graph& graph, const GraphChain& chain,
                          std::span<const StageRun> runs) {
  const auto stages = static_cast<int32_t>(chain.stages.size());
  std::vector<uint8_t> ran_forward(static_cast<size_t>(stages) + 1, 0);
  Sequence sequence;
  for (const StageRun& run : runs) {
    if (run.stage < 1 || run.stage > stages)
      throw InputError(fmt::format("chain plan: stage {} out of range 1..{}", run.stage, stages));
    const StageNodes& nodes = chain.stages[static_cast<size_t>(run.stage) - 1];
    if (run.backward) {
      sequence.insert(sequence.end(), nodes.backward.begin(), nodes.backward.end());
      continue;
    }
    const bool first = !ran_forward[static_cast<size_t>(run.stage)];
    ran_forward[static_cast<size_t>(run.stage)] = 1;
    for (NodeId n : nodes.forward)
      if (first || graph.node(n).recomputable) sequence.push_back(n);
  }
  return sequence;
}

}  // namespace remat
