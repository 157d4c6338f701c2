// lower.h — a joint training graph seen as a Rotor chain, and chain plans lowered back to graph
// sequences (docs/design.md §1 "Chains"; Rockmate's rk-GB cuts, docs/solvers/rockmate.md).
//
// extract_chain() finds the forward separators of a graph whose nodes carry phases: forward node
// x is a separator when no forward value produced before x (graph inputs, size-0 values and the
// chain's shared values aside) is read after x, so everything the rest of the forward needs from
// the part up to x is x's own outputs. The forward nodes between two separators form a stage; the
// block after the last separator (with the loss) is the chain's loss stage L+1. Each backward
// node goes to the stage whose activations it reads (a separator's output may also be read by
// the next stage's backward) and never to a stage after the stages that produce its backward
// inputs. The result does not depend on where a tracer puts two kinds of nodes and values:
// - a *backward helper*, a forward node whose users are all backward nodes or other helpers (the
//   transposed activations and weights a backward reads, which a tracer that sets phases by data
//   flow puts at the end of the forward), is backward work: no forward reader, it runs in the
//   backward of the stage whose values it reads, with its users;
// - a *shared value*, small against the activations made while it lives (a causal mask, rotary
//   tables, position ids, an encoder output read by every decoder layer), may cross cuts when the
//   separators alone leave one stage with more than half of the forward: it is then resident,
//   like a graph input. docs/solvers/rotor.md says when, and how each value is charged.
// When the forward (more than 100 nodes) stays one stage with most of its nodes, `note` names the
// value that crosses its positions; with no separator at all extract_chain() throws, naming it.
//
// The stage sizes are chosen so the chain simulator's peak plus `resident_bytes` bounds the graph
// simulator's peak of the lowered plan: ω_a = the separator outputs later stages read, ω_ā = the
// stage's values its backward reads (and ω_a), ω_δ = the backward values crossing the boundary,
// o_f and o_b = the peaks of the stage's own nodes beyond those, plus the outputs of
// non-recomputable forward nodes (kept from their only run to their last use) and the gradients
// (graph outputs) of later stages. Non-recomputable forward nodes run only in a stage's first
// forward, so their cost is `fixed_cost`, outside u_f: lowered cost = makespan + fixed_cost.
//
//   const GraphChain gc = extract_chain(graph);  // InputError: no phases, fewer than 2 stages
//   ... solve gc.chain with a chain solver under budget - gc.resident_bytes ...
//   const Sequence seq = lower_chain_plan(graph, gc, runs);  // simulate(graph, seq) judges it
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "remat/chain.h"
#include "remat/graph.h"
#include "remat/plan.h"
#include "remat/solver.h"

namespace remat {

struct ChainExtractOptions {
  // More separators than this are thinned to stages of about equal forward cost (the DPs are
  // cubic in the stage count). At least 2.
  int32_t max_stages = 100;
  // A backward node that reads no forward value (a gradient sum) runs in the highest stage its
  // inputs allow, with their producers, rather than the lowest its users allow. Rockmate sets it:
  // the sum of a layer input's gradients then belongs to the layer that reads that input, so
  // identical layers get identical stages (the last one too).
  bool floating_late = false;
};

// The graph side of one chain stage.
struct StageNodes {
  std::vector<NodeId> forward;   // graph order (backward helpers aside)
  std::vector<NodeId> backward;  // its backward helpers, then its backward nodes, in graph order
  std::vector<ValueId> output;   // a^ℓ: separator outputs read by later forward nodes
  std::vector<ValueId> saved;    // ā^ℓ minus a^ℓ: stage values its backward reads
};

struct GraphChain {
  Chain chain;                         // L + 1 stages, the last the loss; chain.input is empty
  std::vector<StageNodes> stages;      // stages 1..L+1 at 0..L
  std::vector<NodeId> separators;      // the last forward node of stages 1..L
  IdVector<NodeId, int32_t> stage_of;  // every node's stage, 1..L+1
  // 1: a forward node only the backward reads (a helper, lower.h's header), run in a stage's
  // backward; its outputs are backward values to the chain.
  IdVector<NodeId, uint8_t> backward_helper;
  // Graph inputs, forward-produced graph outputs and shared values: always live.
  int64_t resident_bytes = 0;
  IdVector<ValueId, uint8_t> shared;  // 1: a shared value (resident, outside the stages' sizes)
  double fixed_cost = 0;              // non-recomputable forward nodes, run once
  int32_t separator_candidates = 0;   // separators found before thinning to max_stages
  std::string note;  // why one stage holds most of a large forward (which value), or empty
};

// Throws InputError naming why the graph has no usable chain structure: a node without phase,
// no forward or no backward node, a forward node reading a backward value, fewer than 2 stages
// (with the value that crosses every position), or a backward node reading the activations of
// two stages.
GraphChain extract_chain(const Graph& graph, const ChainExtractOptions& options = {});

// One run of a stage in a chain plan: its forward (F_ck, F_∅ and F_all lower the same: the
// simulator's liveness keeps what later steps read) or its backward.
struct StageRun {
  int32_t stage = 1;  // 1..L+1
  bool backward = false;
};
// The stage's forward nodes (non-recomputable ones only in its first forward run) or backward
// nodes, run by run. Throws InputError for a stage out of range.
Sequence lower_chain_plan(const Graph& graph, const GraphChain& chain,
                          std::span<const StageRun> runs);

// The chain figures of stage ℓ run another way (a Rockmate option, specs §4.5): its forward runs
// `forward` (the stage's forward nodes, some perhaps more than once), and later its backward runs
// `backward` (its backward nodes, with recomputations of its forward nodes between them). Measured
// by the rules extract_chain() sizes the stages with, so a chain plan using the option still
// bounds the graph simulator's peak: ā = a^ℓ plus the stage's forward values `backward` reads
// before producing them again, o_f and o_b = the peaks of the two runs beyond the live terms.
struct StageRunFigures {
  double u_f = 0, u_b = 0;  // costs (non-recomputable forward nodes are fixed cost, not in u_f)
  int64_t abar = 0, o_f = 0, o_b = 0;
};
StageRunFigures measure_stage_runs(const Graph& graph, const GraphChain& chain, int32_t stage,
                                   std::span<const NodeId> forward,
                                   std::span<const NodeId> backward);

// F_all^1..F_all^{L+1}, B^{L+1}..B^1: every node once (the store-all plan).
std::vector<StageRun> store_all_runs(const GraphChain& chain);

// -- A saved set lowered to a sequence (docs/design.md §1, Partitions; the min-cut solver's plans)
// ---- The forward part of a joint graph as the lowering sees it.
struct ForwardPart {
  IdVector<ValueId, uint8_t> in_forward;      // V_f: values computable from the forward inputs
  IdVector<NodeId, uint8_t> node_in_forward;  // nodes whose outputs are all in V_f
  IdVector<NodeId, uint8_t> no_recompute;     // V_f nodes the lowering must not rerun (bans)
};
enum class SavedLowering {
  kRelease,  // a recomputed value is held only between its first and last direct backward use
  kKeep,     // every recomputed value stays until its last use (no second recomputation)
};
struct LoweredSaved {
  Sequence sequence;
  std::vector<NodeId> recomputed;  // nodes that run more than once, ascending ids
  int64_t extra_runs = 0;          // runs beyond the first, over all nodes
  bool complete = true;            // false: stopped at `max_steps` or the deadline (unusable)
};
// The V_f nodes needed for the forward outputs, the saved values and the non-recomputable nodes,
// in graph order; then the required backward nodes in graph order, each preceded by the
// recomputation of its unsaved V_f inputs (with their unsaved ancestors). REMAT_CHECKs that
// `saved` lies in V_f and that everything the backward needs is saved or recomputable.
LoweredSaved lower_saved_set(const Graph& graph, const ForwardPart& forward,
                             std::span<const ValueId> saved, SavedLowering lowering,
                             int64_t max_steps = INT64_MAX, const Deadline* deadline = nullptr);

}  // namespace remat
