#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "checkmate.h"
#include "checkmate_model/formulation.h"
#include "milp/milp.h"
#include "remat/error.h"
#include "remat/params.h"
#include "remat/simulate.h"

namespace remat::checkmate {
namespace {

struct CheckmateParams {
  std::string write_mps;  // empty: none
  int64_t max_columns = 1'500'000;
  int64_t samples = 20;  // checkmate-lp only, as the two below
  bool repair = true;
  bool bound_only = false;
  bool anneal = true;       // checkmate only, as the one below
  bool start_order = true;  // a start that reorders sets the model's order
};

// The rows both solvers take; checkmate-lp adds `samples`.
std::vector<Param<CheckmateParams>> common_rows() {
  using P = CheckmateParams;
  return {
      {{"write_mps", "none", "", "write the MILP (at the budget) to this MPS file before solving"},
       text(&P::write_mps, "a file name")},
      {{"max_columns", "1500000", "columns",
        "refuse graphs whose model would have more columns (a size guard, before any allocation)"},
       integer(&P::max_columns, 1)},
  };
}

const ParamTable<CheckmateParams>& milp_table() {
  static const ParamTable<CheckmateParams> table("checkmate", [] {
    std::vector<Param<CheckmateParams>> rows = common_rows();
    rows.push_back({{"anneal", "`true`", "",
                     "warm start from fastsa's fixed-order annealing (`mode=fixed-order`) besides "
                     "the repaired default schedule; `false`: the repair heuristics alone"},
                    flag(&CheckmateParams::anneal)});
    rows.push_back({{"order", "`start`", "",
                     "`start`: with a start (`--start`) whose first computations reorder the "
                     "nodes, the model is built over its order (the start is then a MIP start); "
                     "`default`: the default order, the start offered only when it keeps it"},
                    choice(&CheckmateParams::start_order, {{"start", true}, {"default", false}})});
    return rows;
  }());
  return table;
}

const ParamTable<CheckmateParams>& lp_table() {
  static const ParamTable<CheckmateParams> table("checkmate-lp", [] {
    std::vector<Param<CheckmateParams>> rows = common_rows();
    rows.push_back(
        {{"samples", "20", "roundings",
          "randomised roundings per LP solution, besides the 9 deterministic thresholds"},
         integer(&CheckmateParams::samples, 0, 100000)});
    rows.push_back({{"repair", "`true`", "",
                     "repair over-budget roundings and improve the best plan by local search; "
                     "`false`: Checkmate's rounding alone"},
                    flag(&CheckmateParams::repair)});
    rows.push_back({{"bound_only", "`false`", "",
                     "solve the LP at the budget for its bound only; the plan is the default "
                     "schedule (`remat compare --bound checkmate`)"},
                    flag(&CheckmateParams::bound_only)});
    return rows;
  }());
  return table;
}

// Refuses models beyond `max_columns` before allocating them.
void guard_size(std::string_view solver, const Graph& g, int64_t limit) {
  const ModelSize size = estimate_model_size(g);
  if (size.columns > limit)
    throw InputError(fmt::format(
        "{}: the model for '{}' ({} nodes) would have about {} columns and {} rows, above the "
        "limit of {} columns (--param max_columns=N); use checkmate-lp, a smaller graph or another "
        "solver",
        solver, g.name(), g.num_nodes(), size.columns, size.rows, limit));
}

struct Candidate {
  Sequence sequence;
  Evaluation eval;
};

// Keeps the best plan offered (the toolkit's better-plan rule).
class BestPlan {
 public:
  explicit BestPlan(int64_t budget) : budget_(budget) {}
  bool offer(const Graph& g, Sequence sequence) {
    Evaluation e = simulate(g, sequence);
    if (!e.valid) return false;
    if (best_ &&
        !better_plan({e.peak_bytes, e.cost}, {best_->eval.peak_bytes, best_->eval.cost}, budget_))
      return false;
    best_ = Candidate{std::move(sequence), std::move(e)};
    return true;
  }
  bool fits() const { return best_ && best_->eval.peak_bytes <= budget_; }
  const Candidate* best() const { return best_ ? &*best_ : nullptr; }

 private:
  int64_t budget_;
  std::optional<Candidate> best_;
};

void report_progress(const SolveOptions& options, std::string_view stage, double best) {
  if (options.on_progress) options.on_progress(Progress{stage, -1, 0, best});
}

// fastsa under its row's fixed_order_param (mode=fixed-order) anneals recomputations in the
// default order (this MILP's class, except that it may run a node twice in one stage): on RL 1 it
// finds the proven optima in under a second, where the repair heuristics stop well above them and
// CBC improves neither (bench/checkmate_bench.cc). It stops on convergence or its share of the
// work.
SolveResult offer_fixed_order_annealing(const Graph& g, const SolveOptions& options,
                                        const Limits& limits, double share,
                                        const SolverDirectory& others, BestPlan& best) {
  SolveOptions annealing = part_options(options, limits, share);
  annealing.threads = 1;
  const SolverEntry* fastsa = others.find("fastsa");
  if (fastsa == nullptr)
    throw InputError(
        "checkmate: anneal=true needs the fastsa solver, which this build lacks; use "
        "--param anneal=false");
  annealing.params = fixed_order_params(*fastsa);
  const SolveResult r = others.solve(g, fastsa->name, annealing);
  // Offered as the MILP's stages (its values held at each first computation, the cheapest R
  // realising that): fastsa may run a node twice between two first computations, which the
  // model cannot, and a plan outside the model's class would break the bound and the proof.
  if (const std::optional<Retention> held = retention_from_sequence(g, r.plan.sequence))
    best.offer(g, sequence_from_retention(g, *held));
  return r;
}

// A start (SolveOptions::start: e.g. `auto`'s best plan) that keeps the default order of first
// computations, offered as the MILP's stages (its retention realised by the cheapest R), like the
// annealing's plan below; a start that reorders is outside the model's class and is not offered.
// Returns whether it was.
bool offer_start(const Graph& g, const Sequence& start, BestPlan& best) {
  if (start.empty()) return false;
  const std::optional<Retention> held = retention_from_sequence(g, start);
  if (held) best.offer(g, sequence_from_retention(g, *held));
  return held.has_value();
}

// The MILP or LP on `model` with the work `limits` has left (times `share`) and its seconds.
milp::MilpOptions milp_options(const SolveOptions& options, const Limits& limits,
                               const milp::MilpModel& model, double share = 1) {
  milp::MilpOptions m;
  m.time_limit_s = std::max(limits.seconds_left(), 0.05);
  m.iteration_limit = milp::iterations_for(share * limits.left(), model);
  m.seed = options.seed;
  if (options.on_progress)
    m.log = [&options](std::string_view line) { report_progress(options, line, -1); };
  return m;
}

void add_model_counters(SolveStats& stats, const StageModel& sm) {
  // The MPS objective (write_mps) is cost / objective_scale.
  stats.add_counter("objective_scale", sm.cost_scale);
  stats.add_counter("columns", sm.model.num_columns());
  stats.add_counter("rows", sm.model.num_rows());
  stats.add_counter("nonzeros", static_cast<double>(sm.model.num_nonzeros()));
}

// A lower bound in cost units from a scaled objective bound (integer costs round up).
double cost_bound(const StageModel& sm, double scaled) {
  // When every scaled cost is an integer, so is every plan's scaled objective: round the bound up.
  const bool integral =
      std::all_of(sm.graph->nodes().begin(), sm.graph->nodes().end(), [&sm](const Node& n) {
        const double c = n.cost / sm.cost_scale;
        return std::abs(c - std::round(c)) <= 1e-9 * std::max(1.0, std::abs(c));
      });
  const double slack = 1e-6 + 1e-9 * std::abs(scaled);  // CBC's bound tolerance
  return (integral ? std::ceil(scaled - slack) : scaled) * sm.cost_scale;
}

// A bound is at most the cost of any plan that fits; an over-budget plan's cost says nothing.
double clamp_bound(const BestPlan& best, double bound) {
  return best.fits() ? std::min(bound, best.best()->eval.cost) : bound;
}

// A MILP or LP run's work, and its stop, recorded.
void spend(Limits& limits, const milp::MilpModel& model, const milp::MilpResult& r,
           SolveStats& stats) {
  limits.spend(static_cast<double>(r.iterations) * milp::units_per_iteration(model));
  if (r.stopped_on_time) stats.stopped(StopReason::kTimeLimit);
  if (r.stopped_on_iterations) stats.stopped(StopReason::kWorkLimit);
}

// Shares of the work: the fixed-order annealing, the repair of the default schedule and the local
// search from the better of them; the MILP gets the rest.
constexpr double kAnnealShare = 0.25, kRepairShare = 0.2, kImproveShare = 0.2;

// `g` with its nodes in `order` (a topological order), the values as they are.
Graph in_order(const Graph& g, std::span<const NodeId> order) {
  GraphSpec spec;
  spec.name = g.name();
  for (const Value& v : g.values()) spec.values.push_back(v);
  for (NodeId n : order) spec.nodes.push_back(g.node(n));
  return Graph::build(std::move(spec), g.name());
}

class MilpSolver : public Solver {
 public:
  explicit MilpSolver(const SolverDirectory& others) : others_(others) {}

  // A start that reorders (FastSA's plans, `auto`'s anytime rounds) sets the model's order: the
  // MILP is built over the order in which the start first computes the nodes, so the start itself
  // is a MIP start and the plan, bound and proof hold over that order's class of plans.
  Plan solve(const Graph& g, const SolveOptions& options) override {
    const CheckmateParams params = milp_table().parse(options.params);
    const std::optional<std::vector<NodeId>> order =
        params.start_order ? first_run_reordering(g, options.start) : std::nullopt;
    if (!order) return solve_in_order(g, options);
    const Graph reordered = in_order(g, *order);
    IdVector<NodeId, NodeId> position(static_cast<size_t>(g.num_nodes()));
    for (size_t i = 0; i < order->size(); ++i)
      position[(*order)[i]] = NodeId{static_cast<int32_t>(i)};
    SolveOptions o = options;
    for (NodeId& n : o.start) n = position[n];
    Plan plan = solve_in_order(reordered, o);
    for (NodeId& n : plan.sequence) n = (*order)[static_cast<size_t>(n.value())];
    plan.stats.add_counter("start_order", 1);
    return plan;
  }

 private:
  Plan solve_in_order(const Graph& g, const SolveOptions& options) {
    const CheckmateParams params = milp_table().parse(options.params);
    guard_size(milp_table().solver(), g, params.max_columns);
    Limits limits(options.work_limit, options.time_limit_s);
    const int64_t budget = options.budget.bytes;
    const StageModel sm = build_stage_model(g, budget);
    if (!params.write_mps.empty()) milp::write_mps(sm.model, params.write_mps);
    Plan plan;
    SolveStats& stats = plan.stats;

    // Warm start: fixed-order annealing, and the default schedule repaired down to the budget
    // (docs/solvers/checkmate.md); the better of them is improved by local search.
    BestPlan best(budget);
    best.offer(g, default_schedule(g));
    const bool start_offered = offer_start(g, options.start, best);
    std::optional<SolveResult> annealed;
    if (params.anneal) {
      annealed = offer_fixed_order_annealing(g, options, limits, kAnnealShare, others_, best);
      limits.spend(annealed->plan.stats.work);
      stats.stopped(annealed->plan.stats.stop_reason);
    }
    const Retention kept_all = *retention_from_sequence(g, default_schedule(g));
    Limits repair = limits.part(kRepairShare);
    const Retention repaired = repair_retention(g, kept_all, budget, repair);
    limits.spend(repair.spent());
    stats.stopped(repair.reason());
    best.offer(g, sequence_from_retention(g, repaired));
    // Every candidate so far keeps the default order, so it has a retention.
    const Retention improve_from =
        best.fits() ? retention_from_sequence(g, best.best()->sequence).value_or(repaired)
                    : repaired;
    Limits improve = limits.part(kImproveShare);
    const Retention improved =
        improve_retention(g, improve_from, budget, improve, derive_seed(options.seed, 1));
    limits.spend(improve.spent());
    stats.stopped(improve.reason());
    best.offer(g, sequence_from_retention(g, improved));
    report_progress(options, "warm start", best.best()->eval.cost);

    milp::MilpOptions mo = milp_options(options, limits, sm.model);
    std::optional<std::vector<double>> start;
    if (best.fits()) start = sm.encode(best.best()->sequence);
    if (start) mo.start = *start;
    const milp::MilpResult result = milp::solve_milp(sm.model, mo);
    spend(limits, sm.model, result, stats);

    bool from_milp = false;
    if (!result.x.empty())
      from_milp = best.offer(g, sequence_from_retention(g, sm.retention(result.x)));
    plan.sequence = best.best()->sequence;
    stats.status = best.fits() ? SolveStatus::kFeasible : SolveStatus::kOverBudget;
    const bool proved = result.status == milp::MilpStatus::kOptimal;
    const double objective_cost = result.objective * sm.cost_scale;
    if (proved && best.fits() &&
        best.best()->eval.cost <= objective_cost + 1e-9 * std::max(1.0, objective_cost))
      stats.status = SolveStatus::kOptimal;
    if (stats.status == SolveStatus::kOptimal)
      stats.cost_lower_bound = best.best()->eval.cost;
    else if (result.status != milp::MilpStatus::kInfeasible && std::isfinite(result.bound))
      stats.cost_lower_bound = clamp_bound(best, cost_bound(sm, result.bound));
    stats.iterations = result.nodes;
    stats.work = limits.spent();
    add_model_counters(stats, sm);
    stats.add_counter("milp_status", static_cast<double>(result.status));
    stats.add_counter("mip_start", start ? 1 : 0);
    if (!options.start.empty()) stats.add_counter("start_in_fixed_order", start_offered ? 1 : 0);
    stats.add_counter("simplex_iterations", static_cast<double>(result.iterations));
    if (annealed) {
      stats.add_counter("annealing_cost", annealed->eval.cost);
      stats.add_counter("annealing_peak_bytes", static_cast<double>(annealed->eval.peak_bytes));
    }
    stats.add_counter("plan_from_milp", from_milp ? 1 : 0);
    if (!result.x.empty()) stats.add_counter("milp_objective", objective_cost);
    return plan;
  }

  const SolverDirectory& others_;
};

// The LP at the budget gets at most this share of the work; each tighter LP of the budget search
// this share of what is left.
constexpr double kLpShare = 0.5;

class LpSolver : public Solver {
 public:
  Plan solve(const Graph& g, const SolveOptions& options) override {
    const CheckmateParams params = lp_table().parse(options.params);
    guard_size(lp_table().solver(), g, params.max_columns);
    const int64_t samples = params.samples;
    Limits limits(options.work_limit, options.time_limit_s);
    const int64_t budget = options.budget.bytes;
    BestPlan best(budget);
    best.offer(g, default_schedule(g));
    std::mt19937_64 rng(derive_seed(options.seed, 0));
    Plan plan;
    SolveStats& stats = plan.stats;

    // The LP at the budget itself gives the lower bound; roundings start there.
    const StageModel at_budget = build_stage_model(g, budget);
    if (!params.write_mps.empty()) milp::write_mps(at_budget.model, params.write_mps);
    const milp::MilpResult bound =
        milp::solve_lp(at_budget.model, milp_options(options, limits, at_budget.model, kLpShare));
    spend(limits, at_budget.model, bound, stats);
    int64_t simplex_iterations = bound.iterations;
    int64_t rounded = 0;
    const double per_plan = static_cast<double>(g.num_nodes()) * (g.num_nodes() + g.num_values()) /
                            kRetentionStepsPerUnit;
    // Each rounding is judged as it is and, when over budget, once more repaired into it.
    const auto offer = [&](const Retention& held) {
      const Sequence sequence = sequence_from_retention(g, held);
      limits.spend(per_plan);
      if (params.repair && simulate(g, sequence).peak_bytes > budget && !limits.stop())
        best.offer(g, sequence_from_retention(g, repair_retention(g, held, budget, limits)));
      best.offer(g, sequence);
      ++rounded;
    };
    const auto round_all = [&](const StageModel& sm, const std::vector<double>& x) {
      for (int step = 1; step <= 9; ++step) offer(sm.retention(x, step / 10.0));
      std::uniform_real_distribution<double> unit(0, 1);
      for (int64_t i = 0; i < samples && !limits.stop(); ++i) {
        std::vector<double> coin(x.size());
        for (double& c : coin) c = unit(rng);
        Retention held = sm.retention(x, 2.0);
        for (int32_t t = 1; t < sm.stages(); ++t)
          for (int32_t v = 0; v < g.num_values(); ++v) {
            const int32_t col = sm.s(t, ValueId{v});
            if (col >= 0 && coin[static_cast<size_t>(col)] < x[static_cast<size_t>(col)])
              held.set(t, ValueId{v}, true);
          }
        offer(held);
      }
    };
    if (!bound.x.empty() && !params.bound_only) round_all(at_budget, bound.x);
    // Checkmate's budget search: feed the LP a tighter budget until a rounding fits.
    double factor = 0.9;
    int tightenings = 0;
    while (!params.bound_only && !best.fits() && bound.status == milp::MilpStatus::kOptimal &&
           !limits.stop() && tightenings < 6) {
      const StageModel tighter =
          build_stage_model(g, static_cast<int64_t>(factor * static_cast<double>(budget)));
      const milp::MilpResult lp =
          milp::solve_lp(tighter.model, milp_options(options, limits, tighter.model, kLpShare));
      spend(limits, tighter.model, lp, stats);
      simplex_iterations += lp.iterations;
      if (lp.x.empty()) break;
      round_all(tighter, lp.x);
      factor *= 0.9;
      ++tightenings;
    }
    if (params.repair && !params.bound_only && best.fits() && !limits.stop())
      if (const std::optional<Retention> held = retention_from_sequence(g, best.best()->sequence))
        best.offer(g, sequence_from_retention(g, improve_retention(g, *held, budget, limits,
                                                                   derive_seed(options.seed, 1))));
    plan.sequence = best.best()->sequence;
    stats.status = best.fits() ? SolveStatus::kFeasible : SolveStatus::kOverBudget;
    if (bound.status == milp::MilpStatus::kOptimal)
      stats.cost_lower_bound = clamp_bound(best, cost_bound(at_budget, bound.objective));
    add_model_counters(stats, at_budget);
    stats.add_counter("roundings", static_cast<double>(rounded));
    stats.add_counter("budget_tightenings", tightenings);
    stats.add_counter("simplex_iterations", static_cast<double>(simplex_iterations));
    stats.iterations = rounded;
    stats.work = limits.spent();
    stats.stopped(limits.reason());
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> make_milp(const SolverDirectory& others) {
  return std::make_unique<MilpSolver>(others);
}
std::unique_ptr<Solver> make_lp(const SolverDirectory&) { return std::make_unique<LpSolver>(); }

std::span<const ParamInfo> milp_params() { return milp_table().info(); }
std::span<const ParamInfo> lp_params() { return lp_table().info(); }

}  // namespace remat::checkmate
