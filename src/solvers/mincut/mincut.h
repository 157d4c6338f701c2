// mincut.h — fusion-aware min-cut choice of the activations to save
// (papers/fusion-aware-mincut.txt, §3). For a joint forward+backward graph (every node labelled
// with a phase) it finds V_f, the values computable from the forward inputs, bans recomputation by
// op kind (§3.1, §3.4), builds the auxiliary graph G' of Algorithm 1 with the capacities of
// Algorithm 2, and cuts it with Boost's Boykov–Kolmogorov (or push-relabel) max-flow. The cut is
// the saved set V_saved; lower_cut turns it into a sequence (forward, then backward with each
// unsaved value recomputed before its first backward use) that the simulator judges like every
// other plan.
//
// What it does not do: it never looks at the budget when choosing a cut (a cut minimises the
// paper's memory traffic, or saved bytes with objective=memory); the budget only picks between
// lowerings and, with `fallback`, between cuts with fewer bans. It never reorders the forward or
// the backward.
//
//   const JointAnalysis a = analyze_joint(graph, MincutParams{});   // InputError without phases
//   const Cut cut = find_min_cut(graph, a, MaxFlowAlgorithm::kBoykovKolmogorov);
//   const Lowered plan = lower_cut(graph, a, cut.saved, Lowering::kRelease);
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "min_cut/min_cut.h"
#include "remat/graph.h"
#include "remat/ids.h"
#include "remat/params.h"
#include "remat/plan.h"
#include "remat/solver.h"

namespace remat::mincut {

enum class Objective {
  kRuntime,  // the paper: memory traffic between forward and backward, kind-based bans
  kMemory,   // capacity = bytes, only non-recomputable nodes banned: fewest saved bytes
};
using MaxFlowAlgorithm = min_cut::MaxFlowAlgorithm;
enum class Lowering {
  kRelease,  // a recomputed value is held only between its first and last direct backward use
  kKeep,     // every recomputed value stays until its last use (no second recomputation)
  kAuto,  // the solver lowers both and keeps the better (within budget: cheaper; else lower peak)
};

// Parameters (`--param key=value`); defaults are the paper's choices.
struct MincutParams {
  Objective objective = Objective::kRuntime;  // objective=runtime|memory
  bool ban_compute = true;     // §3.1 (3): compute-bound ops, and `other` (unknown) ops
  bool ban_random = true;      // §3.4: random ops (non-recomputable nodes are always banned)
  bool ban_reductions = true;  // §3.4: reductions whose output is reduction_ratio x smaller
  double reduction_ratio = 4;  // §3.4: "4 times smaller in our experiments"
  bool ban_unfusible = true;   // §3.1 (2): nodes not fusible with some backward user
  bool reweight = true;        // §3.4: weight x base^clamp(distance to backward, 1, 100)
  double reweight_base = 1.1;  // PyTorch's partitioner ("complete guess")
  MaxFlowAlgorithm max_flow = MaxFlowAlgorithm::kBoykovKolmogorov;  // max_flow=bk|push_relabel
  Lowering lowering = Lowering::kAuto;                              // lowering=auto|release|keep
  bool fallback = true;  // runtime plan over budget: relax bans step by step (solver.cc)
};
// The parameter table (remat/params.h); parse throws InputError naming an unknown key or a bad
// value.
const ParamTable<MincutParams>& mincut_param_table();
MincutParams parse_mincut_params(const ParamMap& params);

// Saving a value that fusion would keep in registers costs a write plus a read (§3.3, Alg. 2).
inline constexpr double kUnmaterializedSaveFactor = 2.0;
// The re-weighting exponent is clamped to [1, 100] like PyTorch's partitioner.
inline constexpr int32_t kMaxReweightDistance = 100;

enum class BanReason : uint8_t {
  kNone,
  kNotRecomputable,  // recomputable=false: always banned (it must run exactly once)
  kRandom,
  kCompute,
  kReduction,
  kUnfusible,
};
std::string_view to_string(BanReason reason);

// What the cut needs to know about a joint graph, by value and node id.
struct JointAnalysis {
  IdVector<ValueId, uint8_t> in_vf;          // V_f: computable from the forward inputs
  IdVector<NodeId, uint8_t> node_in_vf;      // all outputs in V_f
  IdVector<ValueId, uint8_t> forward_input;  // graph input read by a forward-phase node
  IdVector<NodeId, BanReason> ban;           // kNone for nodes outside V_f
  IdVector<ValueId, uint8_t> materialized;   // Alg. 2 is_materialized
  IdVector<ValueId, int32_t> distance;       // hops to the backward (re-weighting)
  IdVector<ValueId, double> capacity;        // the (in, out) edge of G'; 0 outside V_f
  // V_f values that some backward node needs, directly or through V_f nodes; a cut saves only
  // these (checked), since no other out-vertex reaches t.
  IdVector<ValueId, uint8_t> backward_relevant;
  // V_f is the forward phase alone: the looser rule took in every backward node (a gradient
  // seed computed from the forward, such as ones_like(loss)).
  bool split_from_phase = false;
  bool banned(NodeId n) const { return ban[n] != BanReason::kNone; }
};
// Throws InputError when a node has no phase, or a forward node reads a backward value.
JointAnalysis analyze_joint(const Graph& graph, const MincutParams& params);

struct Cut {
  std::vector<ValueId> saved;  // V_saved, ascending ids
  double capacity = 0;         // sum of capacity over saved (the cut's value in real units)
  int32_t num_vertices = 0;    // of G'
  int32_t num_edges = 0;       // of G', reverse edges not counted
};
Cut find_min_cut(const Graph& graph, const JointAnalysis& analysis, MaxFlowAlgorithm algorithm);

// Sum of the capacities of `saved` (Lemma 3.5): what any cut with these cut-set nodes costs.
double cut_capacity(const JointAnalysis& analysis, std::span<const ValueId> saved);

struct Lowered {
  Sequence sequence;
  std::vector<NodeId> recomputed;  // nodes that run more than once, ascending ids
  int64_t extra_runs = 0;          // runs beyond the first, over all nodes
  bool complete = true;            // false: stopped at the step limit or deadline (unusable)
};
// kRelease may recompute quadratically many nodes on long unsaved chains; the solver stops it
// here (or at its deadline) and uses kKeep instead.
inline constexpr int64_t kMaxLoweredSteps = 20'000'000;
// Forward nodes needed for the forward outputs, the saved values and the non-recomputable nodes,
// in graph order; then the backward nodes in graph order, each preceded by the recomputation of
// its unsaved V_f inputs (with their unsaved ancestors). REMAT_CHECKs that `saved` is valid.
// `lowering` is kRelease or kKeep (kAuto is the solver's choice between them).
Lowered lower_cut(const Graph& graph, const JointAnalysis& analysis, std::span<const ValueId> saved,
                  Lowering lowering, int64_t max_steps = INT64_MAX,
                  const Deadline* deadline = nullptr);

std::unique_ptr<Solver> make(const SolverDirectory& others);
std::span<const ParamInfo> params();

}  // namespace remat::mincut
