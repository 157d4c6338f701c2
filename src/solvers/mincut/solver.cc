// The `mincut` solver: parameters, the cut, the lowering and the statistics of a plan.
#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "mincut/mincut.h"
#include "remat/error.h"
#include "remat/simulate.h"

namespace remat::mincut {
namespace {

constexpr std::string_view kName = "mincut";

struct Candidate {
  Cut cut;
  Lowered lowered;
  Evaluation eval;
  Objective objective = Objective::kRuntime;
  Lowering lowering = Lowering::kRelease;
  double cut_time_s = 0;  // analysis, G' and max-flow
  int32_t banned = 0;
  int32_t vf_values = 0;
  bool split_from_phase = false;
  bool is_default = false;  // the default schedule, the ladder's last rung
};

// The default schedule as a candidate: no cut, nothing recomputed.
Candidate default_candidate(const Graph& graph) {
  Candidate c{.is_default = true};
  c.lowered.sequence = default_schedule(graph);
  c.lowered.complete = true;
  c.eval = simulate(graph, c.lowered.sequence);
  return c;
}

// The core's better-plan rule (remat/toolkit.h); ties keep the earlier candidate.
bool better(const Candidate& a, const Candidate& b, int64_t budget) {
  return better_plan({a.eval.peak_bytes, a.eval.cost}, {b.eval.peak_bytes, b.eval.cost}, budget);
}

// The cut for `p`, lowered as asked (both ways under kAuto); the best by `better`.
// Its work (SolveOptions::work_limit) is in steps lowered and simulated, at the simulator's rate:
// the release lowering, the part that may grow large, stops at the work left (kKeep stands in).
Candidate solve_with(const Graph& graph, const MincutParams& p, int64_t budget, Limits& limits) {
  const Deadline& deadline = limits.deadline();
  const auto start = std::chrono::steady_clock::now();
  const JointAnalysis analysis = analyze_joint(graph, p);
  const Cut cut = find_min_cut(graph, analysis, p.max_flow);
  const double cut_time_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::optional<Candidate> best;
  for (Lowering lowering : {Lowering::kRelease, Lowering::kKeep}) {
    // kKeep (linear in size) is the stand-in when a requested kRelease hits its limits.
    const bool wanted = p.lowering == Lowering::kAuto || p.lowering == lowering ||
                        (lowering == Lowering::kKeep && !best);
    if (!wanted) continue;
    Candidate c{
        .cut = cut, .objective = p.objective, .lowering = lowering, .cut_time_s = cut_time_s};
    const int64_t max_steps =
        std::min(kMaxLoweredSteps, work_ops(limits.left(), kSimulatedStepsPerUnit));
    c.lowered = lowering == Lowering::kRelease
                    ? lower_cut(graph, analysis, cut.saved, lowering, max_steps, &deadline)
                    : lower_cut(graph, analysis, cut.saved, lowering);
    limits.spend(static_cast<double>(c.lowered.sequence.size()) / kSimulatedStepsPerUnit);
    if (!c.lowered.complete) {
      if (max_steps < kMaxLoweredSteps && !deadline.expired()) limits.note_work_limit();
      continue;
    }
    c.eval = simulate(graph, c.lowered.sequence);
    limits.spend(static_cast<double>(c.lowered.sequence.size()) / kSimulatedStepsPerUnit);
    REMAT_CHECK(c.eval.valid, fmt::format("mincut: lowered plan is invalid: {}", c.eval.error));
    for (int32_t i = 0; i < graph.num_nodes(); ++i) c.banned += analysis.banned(NodeId{i});
    for (int32_t i = 0; i < graph.num_values(); ++i) c.vf_values += analysis.in_vf[ValueId{i}];
    c.split_from_phase = analysis.split_from_phase;
    if (!best || better(c, *best, budget)) best = std::move(c);
  }
  return std::move(*best);
}

// With `fallback`, a runtime plan over budget is retried with more recomputation allowed, one
// step at a time: without the unfusible ban, then also without the reduction ban, then the memory
// objective. The random and compute bans stay (their nodes are the costly or unsafe ones to run
// twice); the memory objective still bans non-recomputable nodes.
struct Rung {
  MincutParams params;
  std::string relaxes;  // what this rung gives up, for the plan's "relaxed" list
};
std::vector<Rung> fallback_ladder(const MincutParams& asked) {
  std::vector<Rung> ladder = {{asked, ""}};
  if (!asked.fallback || asked.objective != Objective::kRuntime) return ladder;
  MincutParams p = asked;
  if (p.ban_unfusible) {
    p.ban_unfusible = false;
    ladder.push_back({p, "ban_unfusible"});
  }
  if (p.ban_reductions) {
    p.ban_reductions = false;
    ladder.push_back({p, "ban_reductions"});
  }
  p = asked;
  p.objective = Objective::kMemory;
  ladder.push_back({p, "objective=memory"});
  return ladder;
}

class MincutSolver final : public Solver {
 public:
  Plan solve(const Graph& graph, const SolveOptions& options) override {
    const MincutParams params = parse_mincut_params(options.params);
    const int64_t budget = options.budget.bytes;
    Limits limits(options.work_limit, options.time_limit_s);
    const std::vector<Rung> ladder = fallback_ladder(params);
    Candidate best = solve_with(graph, ladder[0].params, budget, limits);
    size_t best_rung = 0;
    for (size_t rung = 1; rung < ladder.size() && best.eval.peak_bytes > budget; ++rung) {
      Candidate c = solve_with(graph, ladder[rung].params, budget, limits);
      if (better(c, best, budget)) {
        best = std::move(c);
        best_rung = rung;
      }
    }
    // The ladder ends with the default schedule: a plan over budget never has a higher peak than
    // it. (Within budget the cut's plan stays, even when it recomputes for fusion's sake.)
    Candidate fallback = default_candidate(graph);
    if (best.eval.peak_bytes > budget && better(fallback, best, budget)) {
      fallback.split_from_phase = best.split_from_phase;
      best = std::move(fallback);
    }
    Plan plan;
    plan.sequence = best.lowered.sequence;
    plan.stats.status = SolveStatus::kFeasible;
    plan.stats.cost_lower_bound = cost_lower_bound(graph);
    // The release lowering stops at the deadline or the work limit (then the keep lowering
    // stands in).
    plan.stats.stopped(limits.reason());
    plan.stats.work = limits.spent();
    add_stats(graph, best, params.objective, plan.stats);
    plan.stats.add_counter("fallback_rung", static_cast<double>(best_rung));
    std::vector<std::string> relaxed;
    for (size_t rung = 1; rung <= best_rung; ++rung) relaxed.push_back(ladder[rung].relaxes);
    plan.stats.lists.emplace_back("relaxed", std::move(relaxed));
    return plan;
  }

 private:
  static void add_stats(const Graph& graph, const Candidate& c, Objective asked, SolveStats& s) {
    std::vector<std::string> saved, recomputed;
    std::vector<double> bytes_each;  // aligned with the "saved" list
    int64_t saved_bytes = 0;
    for (ValueId v : c.cut.saved) {
      saved.push_back(graph.value(v).name);
      bytes_each.push_back(static_cast<double>(graph.value(v).size_bytes));
      saved_bytes += graph.value(v).size_bytes;
    }
    for (NodeId n : c.lowered.recomputed) recomputed.push_back(graph.node(n).name);
    s.add_counter("vf_values", c.vf_values);
    s.add_counter("banned_nodes", c.banned);
    s.add_counter("saved_values", static_cast<double>(c.cut.saved.size()));
    s.add_counter("saved_bytes", static_cast<double>(saved_bytes));
    s.add_counter("cut_capacity", c.cut.capacity);
    s.add_counter("recomputed_nodes", static_cast<double>(c.lowered.recomputed.size()));
    s.add_counter("extra_runs", static_cast<double>(c.lowered.extra_runs));
    s.add_counter("flow_vertices", c.cut.num_vertices);
    s.add_counter("flow_edges", c.cut.num_edges);
    s.add_counter("cut_time_s", c.cut_time_s);
    s.add_counter("memory_fallback", c.objective != asked ? 1 : 0);
    s.add_counter("lowering_keep", c.lowering == Lowering::kKeep ? 1 : 0);
    s.add_counter("split_from_phase", c.split_from_phase ? 1 : 0);
    s.add_counter("default_schedule", c.is_default ? 1 : 0);
    s.lists.emplace_back("saved", std::move(saved));
    s.series.emplace_back("saved_bytes", std::move(bytes_each));
    s.lists.emplace_back("recomputed", std::move(recomputed));
  }
};

}  // namespace

const ParamTable<MincutParams>& mincut_param_table() {
  using P = MincutParams;
  static const ParamTable<P> table(
      kName,
      {
          {{"objective", "`runtime`", "", "`runtime` (the paper) or `memory` (fewest saved bytes)"},
           choice(&P::objective,
                  {{"runtime", Objective::kRuntime}, {"memory", Objective::kMemory}})},
          {{"ban_compute", "`true`", "", "ban `compute` and `other` nodes (§3.1 assumption 3)"},
           flag(&P::ban_compute)},
          {{"ban_random", "`true`", "",
            "ban `random` nodes (§3.4); `recomputable: false` is banned regardless"},
           flag(&P::ban_random)},
          {{"ban_reductions", "`true`", "",
            "ban reductions with input bytes ≥ `reduction_ratio` × output bytes (§3.4)"},
           flag(&P::ban_reductions)},
          {{"reduction_ratio", "`4`", "ratio", "≥ 1"}, real(&P::reduction_ratio, 1.0)},
          {{"ban_unfusible", "`true`", "",
            "ban nodes not fusible with some backward user (§3.1 assumption 2, Lemma 3.1)"},
           flag(&P::ban_unfusible)},
          {{"reweight", "`true`", "", "bias toward values close to the backward (§3.4)"},
           flag(&P::reweight)},
          {{"reweight_base", "`1.1`", "", "in [1, 2]; PyTorch's value"},
           real(&P::reweight_base, 1.0, 2.0)},
          {{"max_flow", "`bk`", "", "`bk` (Boykov–Kolmogorov) or `push_relabel`"},
           choice(&P::max_flow, {{"bk", MaxFlowAlgorithm::kBoykovKolmogorov},
                                 {"push_relabel", MaxFlowAlgorithm::kPushRelabel}})},
          {{"lowering", "`auto`", "", "`auto`, `release` or `keep` (above)"},
           choice(&P::lowering, {{"auto", Lowering::kAuto},
                                 {"release", Lowering::kRelease},
                                 {"keep", Lowering::kKeep}})},
          {{"fallback", "`true`", "",
            "when the runtime plan is over budget, relax bans step by step (above)"},
           flag(&P::fallback)},
      });
  return table;
}

MincutParams parse_mincut_params(const ParamMap& params) {
  return mincut_param_table().parse(params);
}

std::unique_ptr<Solver> make(const SolverDirectory&) { return std::make_unique<MincutSolver>(); }

std::span<const ParamInfo> params() { return mincut_param_table().info(); }

}  // namespace remat::mincut
