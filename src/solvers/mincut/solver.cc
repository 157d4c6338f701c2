// The `mincut` solver: parameters, the cut, the lowering and the statistics of a plan.
#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "mincut.h"
#include "remat/error.h"
#include "remat/simulate.h"

namespace remat::mincut {
namespace {

constexpr std::string_view kName = "mincut";

template <class Enum, size_t N>
Enum parse_choice(const ParamMap& params, std::string_view key, Enum fallback,
                  const std::pair<std::string_view, Enum> (&choices)[N]) {
  const auto it = params.find(std::string(key));
  if (it == params.end()) return fallback;
  std::vector<std::string_view> names;
  for (const auto& [name, value] : choices) {
    if (name == it->second) return value;
    names.push_back(name);
  }
  throw InputError(fmt::format("{}: invalid value '{}' for parameter '{}' (expected {})", kName,
                               it->second, key, fmt::join(names, " or ")));
}

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

// Within budget: cheaper wins; otherwise lower peak wins; ties keep the earlier candidate.
bool better(const Candidate& a, const Candidate& b, int64_t budget) {
  const bool a_fits = a.eval.peak_bytes <= budget, b_fits = b.eval.peak_bytes <= budget;
  if (a_fits != b_fits) return a_fits;
  if (a_fits) return a.eval.cost < b.eval.cost;
  return a.eval.peak_bytes < b.eval.peak_bytes;
}

// The cut for `p`, lowered as asked (both ways under kAuto); the best by `better`.
Candidate solve_with(const Graph& graph, const MincutParams& p, int64_t budget,
                     const Deadline& deadline) {
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
    c.lowered = lowering == Lowering::kRelease
                    ? lower_cut(graph, analysis, cut.saved, lowering, kMaxLoweredSteps, &deadline)
                    : lower_cut(graph, analysis, cut.saved, lowering);
    if (!c.lowered.complete) continue;
    c.eval = simulate(graph, c.lowered.sequence);
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
  std::string_view name() const override { return kName; }

  Plan solve(const Graph& graph, const SolveOptions& options) override {
    const MincutParams params = parse_mincut_params(options.params);
    const int64_t budget = options.budget.bytes;
    const Deadline deadline(options.time_limit_s);
    const std::vector<Rung> ladder = fallback_ladder(params);
    Candidate best = solve_with(graph, ladder[0].params, budget, deadline);
    size_t best_rung = 0;
    for (size_t rung = 1; rung < ladder.size() && best.eval.peak_bytes > budget; ++rung) {
      Candidate c = solve_with(graph, ladder[rung].params, budget, deadline);
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

MincutParams parse_mincut_params(const ParamMap& params) {
  static constexpr std::string_view kKnown[] = {
      "objective",       "ban_compute",   "ban_random", "ban_reductions",
      "reduction_ratio", "ban_unfusible", "reweight",   "reweight_base",
      "max_flow",        "lowering",      "fallback"};
  check_known_params(kName, params, kKnown);
  MincutParams p;
  p.objective = parse_choice(params, "objective", p.objective,
                             {std::pair{std::string_view("runtime"), Objective::kRuntime},
                              std::pair{std::string_view("memory"), Objective::kMemory}});
  p.ban_compute = param_bool(kName, params, "ban_compute", p.ban_compute);
  p.ban_random = param_bool(kName, params, "ban_random", p.ban_random);
  p.ban_reductions = param_bool(kName, params, "ban_reductions", p.ban_reductions);
  p.reduction_ratio = param_double(kName, params, "reduction_ratio", p.reduction_ratio);
  if (!(p.reduction_ratio >= 1))
    throw InputError(
        fmt::format("{}: invalid value '{}' for parameter 'reduction_ratio' (expected "
                    "a number >= 1)",
                    kName, params.at("reduction_ratio")));
  p.ban_unfusible = param_bool(kName, params, "ban_unfusible", p.ban_unfusible);
  p.reweight = param_bool(kName, params, "reweight", p.reweight);
  p.reweight_base = param_double(kName, params, "reweight_base", p.reweight_base);
  if (!(p.reweight_base >= 1 && p.reweight_base <= 2))
    throw InputError(
        fmt::format("{}: invalid value '{}' for parameter 'reweight_base' (expected "
                    "a number in [1, 2])",
                    kName, params.at("reweight_base")));
  p.max_flow =
      parse_choice(params, "max_flow", p.max_flow,
                   {std::pair{std::string_view("bk"), MaxFlowAlgorithm::kBoykovKolmogorov},
                    std::pair{std::string_view("push_relabel"), MaxFlowAlgorithm::kPushRelabel}});
  p.lowering = parse_choice(params, "lowering", p.lowering,
                            {std::pair{std::string_view("auto"), Lowering::kAuto},
                             std::pair{std::string_view("release"), Lowering::kRelease},
                             std::pair{std::string_view("keep"), Lowering::kKeep}});
  p.fallback = param_bool(kName, params, "fallback", p.fallback);
  return p;
}

std::unique_ptr<Solver> make() { return std::make_unique<MincutSolver>(); }

}  // namespace remat::mincut
