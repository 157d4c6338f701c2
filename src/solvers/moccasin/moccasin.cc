#include "moccasin/moccasin.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "moccasin/incumbent.h"
#include "moccasin/instance.h"
#include "remat/error.h"
#include "remat/params.h"

namespace remat::moccasin {
namespace {

constexpr std::string_view kName = "moccasin";
constexpr int64_t kMaxUnits = int64_t{1} << 30;  // room for sums inside Gecode's int32

// Sizes in units of `unit` bytes: sizes round up, the budget rounds down, so a plan that fits
// the model fits in bytes.
int64_t size_unit(const Graph& graph) {
  int64_t gcd = 0, total = 0;
  for (const Value& value : graph.values()) {
    gcd = std::gcd(gcd, value.size_bytes);
    total += value.size_bytes;
  }
  for (const Node& node : graph.nodes()) {
    gcd = std::gcd(gcd, node.temp_bytes);
    total += node.temp_bytes;
  }
  if (gcd == 0) return 1;
  const int64_t units = total / gcd;
  return gcd * std::max<int64_t>(1, (units + kMaxUnits - 1) / kMaxUnits);
}

// Integer costs are kept exactly when they fit; otherwise they are quantised to a total of 1e9
// (then "optimal" means optimal for the quantised costs; the simulator gives the true cost).
std::vector<int32_t> scaled_weights(const Graph& graph, int copies, bool& exact) {
  double total = 0;
  exact = true;
  for (const Node& node : graph.nodes()) {
    total += node.cost;
    if (node.cost != std::floor(node.cost)) exact = false;
  }
  exact = exact && total * copies <= 1e9;
  std::vector<int32_t> weights;
  for (const Node& node : graph.nodes())
    weights.push_back(static_cast<int32_t>(
        exact ? node.cost : std::llround(node.cost / std::max(total, 1e-300) * 1e9 / copies)));
  return weights;
}

struct Built {
  Instance instance;
  bool exact_costs = true;
  int64_t size_unit = 1;  // bytes per memory unit of the model
};

// `min_copies` (per node, may be empty) raises C_v where a start plan runs a node more often;
// sizes are counted in size_unit() times `coarser` bytes.
Built build_instance(const Graph& graph, int64_t budget, int copies, bool staged,
                     std::span<const int32_t> min_copies, int64_t coarser) {
  Built built;
  Instance& inst = built.instance;
  inst.staged = staged;
  const int64_t fine = size_unit(graph);
  const int64_t unit = fine > kMaxTotalBytes / coarser ? kMaxTotalBytes : fine * coarser;
  built.size_unit = unit;
  auto units = [&](int64_t bytes) { return static_cast<int32_t>((bytes + unit - 1) / unit); };
  int64_t inputs = 0;
  for (ValueId v : graph.graph_inputs()) inputs += graph.value(v).size_bytes;
  inst.capacity = static_cast<int32_t>(std::clamp<int64_t>((budget - inputs) / unit, 0, kMaxUnits));
  int max_copies = copies;
  for (int32_t c : min_copies) max_copies = std::max(max_copies, static_cast<int>(c));
  const std::vector<int32_t> weights = scaled_weights(graph, max_copies, built.exact_costs);
  const int32_t n = graph.num_nodes();
  // Where each value is produced: (position, output index).
  IdVector<ValueId, std::pair<int32_t, int32_t>> made_by(graph.num_values(), {-1, -1});
  for (int32_t p = 0; p < n; ++p) {
    const Node& node = graph.node(NodeId{p});
    NodeModel model;
    const int wanted =
        min_copies.empty() ? copies : std::max(copies, static_cast<int>(min_copies[p]));
    // C_v = 1 for non-recomputable nodes; in staged mode the last node has no later stage.
    model.copies = node.recomputable ? std::min(wanted, staged ? n - p : wanted) : 1;
    model.weight = weights[static_cast<size_t>(p)];
    model.temp = units(node.temp_bytes);
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const Value& value = graph.value(node.outputs[k]);
      model.outputs.push_back({units(value.size_bytes), value.is_output});
      made_by[node.outputs[k]] = {p, static_cast<int32_t>(k)};
    }
    for (ValueId input : node.inputs) {
      if (graph.is_graph_input(input)) continue;
      const auto [producer, output] = made_by[input];
      const Use use{producer, output};
      const bool seen = std::any_of(model.uses.begin(), model.uses.end(), [&](const Use& u) {
        return u.producer == use.producer && u.output == use.output;
      });
      if (!seen) model.uses.push_back(use);
    }
    inst.nodes.push_back(std::move(model));
  }
  return built;
}

// The instance in the finest size unit that keeps it inside Gecode's integer range
// (gecode_range_use): on large graphs the cumulative's capacity times its tasks' start domains
// overflows 64 bits in size_unit()'s, and Gecode refuses the model. Sizes still round up and the
// budget down, so plans stay within it.
Built build_within_gecode_range(const Graph& graph, int64_t budget, int copies, bool staged,
                                std::span<const int32_t> min_copies) {
  int64_t coarser = 1;
  double last_use = HUGE_VAL;
  for (;;) {
    Built built = build_instance(graph, budget, copies, staged, min_copies, coarser);
    const double use = gecode_range_use(built.instance);
    if (use <= 1) return built;
    // Every size is one unit already (or the horizon alone is too long): no unit helps.
    if (!(use < last_use) || built.size_unit == kMaxTotalBytes)
      throw UnsupportedGraph(fmt::format(
          "moccasin: '{}' ({} nodes, {} copies per node) needs {:.3g} times Gecode's integer "
          "range whatever the size unit; use fewer copies (parameter c) or another solver",
          shorten(graph.name()), graph.num_nodes(), copies, use));
    last_use = use;
    const auto factor = static_cast<int64_t>(std::min(std::ceil(use) + 1, 0x1p40));
    coarser = coarser > kMaxTotalBytes / factor ? kMaxTotalBytes : coarser * factor;
  }
}

Sequence to_sequence(const Solution& solution) {
  std::vector<std::pair<int32_t, int32_t>> events;  // (start, position)
  for (size_t p = 0; p < solution.copies.size(); ++p)
    for (const CopyValue& copy : solution.copies[p])
      if (copy.active) events.emplace_back(copy.start, static_cast<int32_t>(p));
  std::sort(events.begin(), events.end());
  Sequence sequence;
  for (const auto& [start, position] : events) sequence.push_back(NodeId{position});
  return sequence;
}

// Where the warm start comes from (`auto`: see warm_solvers()).
enum class Warm { kAuto, kNone, kCheckmateLp, kFastsa, kFastsaFixed };

struct MoccasinParams {
  int64_t copies = 2;  // C_v
  bool fixed_order = true;
  bool afc_branching = false;
  bool scattered_lns = true;
  int64_t lns_nodes = 10;
  double proof_fraction = 0.3;
  bool phase1 = true;
  Warm warm = Warm::kAuto;
  double warm_fraction = 0.25;
};

const ParamTable<MoccasinParams>& param_table() {
  using P = MoccasinParams;
  static const ParamTable<P> table(
      kName,
      {
          {{"c", "2", "copies",
            "copies per node `C_v` (1..64), the first computation included; raised per node to "
            "the start plan's computations"},
           integer(&P::copies, 1, 64)},
          {{"order", "`fixed`", "",
            "`fixed`: staged events in the node order; `free`: events `1..Σ C_v`, all-different"},
           choice(&P::fixed_order, {{"fixed", true}, {"free", false}})},
          {{"branch", "`order`", "", "`order` (above) or `afc`"},
           choice(&P::afc_branching, {{"order", false}, {"afc", true}})},
          {{"lns", "`scattered`", "",
            "LNS neighbourhood: `scattered` (random nodes) or `window` (consecutive nodes)"},
           choice(&P::scattered_lns, {{"scattered", true}, {"window", false}})},
          {{"lns_nodes", "10", "nodes",
            "nodes relaxed by one LNS restart (on average with `lns=scattered`), at least 1"},
           integer(&P::lns_nodes, 1)},
          {{"proof_fraction", "0.3", "share",
            "share of each phase's work for the complete search, in (0, 1]"},
           real(&P::proof_fraction, 0.0, 1.0, /*above_min=*/true)},
          {{"phase1", "`true`", "",
            "`false`: skip phase 1 (phase 2 alone must find a plan within budget)"},
           flag(&P::phase1)},
          {{"warm", "`auto`", "",
            "solver whose plan starts the search: `fastsa-fixed` (fastsa mode=fixed-order), "
            "`checkmate-lp`, `fastsa`, `none`, or `auto` (order=fixed: fastsa-fixed, and "
            "checkmate-lp up to 150 nodes when registered, the better plan; order=free: fastsa)"},
           choice(&P::warm, {{"auto", Warm::kAuto},
                             {"none", Warm::kNone},
                             {"fastsa-fixed", Warm::kFastsaFixed},
                             {"checkmate-lp", Warm::kCheckmateLp},
                             {"fastsa", Warm::kFastsa}})},
          {{"warm_fraction", "0.25", "share",
            "share of the work (and time) limit the warm-start solvers may use, in (0, 0.95]"},
           real(&P::warm_fraction, 0.0, 0.95, /*above_min=*/true)},
      });
  return table;
}

// A warm-start solver to run: its name, its parameters, and how the stats name the run.
struct WarmRun {
  std::string solver;
  ParamMap params;
  std::string label;
};

// `row` run so that its plans keep the default order (its fixed_order_param, when it has one).
WarmRun fixed_order_run(const SolverEntry& row) {
  WarmRun run{std::string(row.name), fixed_order_params(row), std::string(row.name)};
  if (!run.params.empty()) run.label += " " + std::string(row.fixed_order_param);
  return run;
}

// The warm-start solvers to run, in order. warm=auto: the rows that offer warm starts
// (SolverEntry::warm_starts) within their size limit, in registry order; in the fixed order each
// run so that its plans keep it (fastsa mode=fixed-order, checkmate-lp), with order=free only
// those that reorder (fastsa).
std::vector<WarmRun> warm_solvers(Warm warm, const Graph& graph, bool fixed_order,
                                  const SolverDirectory& others) {
  const auto named = [&](std::string_view name, bool keep_order) {
    const SolverEntry* row = others.find(name);
    if (row == nullptr)
      throw InputError(
          fmt::format("moccasin: the warm-start solver {} is not registered in this "
                      "build",
                      name));
    return keep_order ? fixed_order_run(*row) : WarmRun{std::string(name), {}, std::string(name)};
  };
  switch (warm) {
    case Warm::kNone:
      return {};
    case Warm::kCheckmateLp:
      return {named("checkmate-lp", false)};
    case Warm::kFastsa:
      return {named("fastsa", false)};
    case Warm::kFastsaFixed:
      return {named("fastsa", true)};
    case Warm::kAuto:
      break;
  }
  std::vector<WarmRun> runs;
  for (const SolverEntry& row : others.rows()) {
    if (!row.warm_starts) continue;
    if (row.warm_start_max_nodes > 0 && graph.num_nodes() > row.warm_start_max_nodes) continue;
    if (!fixed_order && !row.keeps_default_order)
      runs.push_back(WarmRun{std::string(row.name), {}, std::string(row.name)});
    if (fixed_order && (row.keeps_default_order || !row.fixed_order_param.empty()))
      runs.push_back(fixed_order_run(row));
  }
  return runs;
}

// A plan to start from and where it came from ("start", a solver's name).
struct StartPlan {
  Sequence sequence;
  std::string from;
  StopReason stop_reason = StopReason::kConverged;  // of the warm-start runs
};

// The caller's start (SolveOptions::start: a plan file the front end read, or another solver's
// plan), else the warm-start solvers' best judged plan, else nothing. The warm-start solvers share
// `warm_fraction` of the work and time `limits` has (spent from it).
std::optional<StartPlan> find_start(const Graph& graph, const SolveOptions& options,
                                    const MoccasinParams& p, const SolverDirectory& others,
                                    Limits& limits) {
  if (!options.start.empty()) return StartPlan{options.start, "start"};
  Limits warm_limits = limits.part(p.warm_fraction);
  const std::vector<WarmRun> solvers = warm_solvers(p.warm, graph, p.fixed_order, others);
  std::optional<StartPlan> best;
  PlanScore best_score{};
  StopReason stopped = StopReason::kConverged;
  for (size_t k = 0; k < solvers.size(); ++k) {
    const auto& [solver, params, label] = solvers[k];
    SolveOptions warm =
        part_options(options, warm_limits, 1.0 / static_cast<double>(solvers.size() - k));
    warm.params = params;
    SolveResult r;
    try {
      r = others.solve(graph, solver, warm);
    } catch (const UnsupportedGraph&) {
      // In `auto`, a warm solver that cannot take this graph (checkmate-lp's range) is skipped.
      if (p.warm != Warm::kAuto) throw;
      continue;
    }
    warm_limits.spend(r.plan.stats.work);
    const PlanScore score{r.eval.peak_bytes, r.eval.cost};
    stopped = std::max(stopped, r.plan.stats.stop_reason);
    if (!best || better_plan(score, best_score, options.budget.bytes)) {
      best = StartPlan{std::move(r.plan.sequence), label};
      best_score = score;
    }
  }
  if (best) best->stop_reason = stopped;
  limits.spend(warm_limits.spent());
  return best;
}

struct Phases {
  PhaseResult phase1, phase2;
};

SearchParams search_params(const Graph& graph, const SolveOptions& options, const MoccasinParams& p,
                           const Deadline& clock) {
  SearchParams search;
  search.deadline = &clock;
  search.threads = options.threads;
  search.seed = options.seed;
  search.afc_branching = p.afc_branching;
  search.lns_fraction =
      std::min(1.0, static_cast<double>(p.lns_nodes) / std::max(1, graph.num_nodes()));
  search.proof_fraction = p.proof_fraction;
  search.scattered_lns = p.scattered_lns;
  return search;
}

// Phase 1 (min max(M_var, M)) from `first` (the start plan, else the no-recomputation plan); it
// stops as soon as a plan fits. A start plan within the capacity (`fitting_start`) skips it. It
// gets three quarters of the work left, phase 2 (least cost within the capacity) the rest.
Phases run_phases(const Instance& inst, const MoccasinParams& p, const Solution* first,
                  const Solution* fitting_start, SearchParams search, Limits& limits) {
  Phases out;
  PhaseResult& phase1 = out.phase1;
  const bool run_phase1 = p.phase1 && fitting_start == nullptr;
  if (run_phase1) {
    search.work_limit = limits.left() * 0.75;
    phase1 = solve_phase1(inst, first, search);
    limits.spend(static_cast<double>(phase1.propagations) / propagations_per_unit(inst));
  }
  const Solution* phase2_start = run_phase1 && phase1.found ? &phase1.best : fitting_start;
  const bool fits = !p.phase1 || fitting_start != nullptr ||
                    (phase1.found && phase1.best.objective <= inst.capacity);
  if (fits) {
    search.work_limit = limits.left();
    out.phase2 = solve_phase2(inst, phase2_start, search);
    limits.spend(static_cast<double>(out.phase2.propagations) / propagations_per_unit(inst));
  }
  return out;
}

// The plan: the model's best, the start plan or the default schedule (in `plan` on entry),
// whichever the simulator ranks best (so never worse than the warm start). Returns which:
// "model", "start" or "default".
std::string pick_plan(const Graph& graph, int64_t budget, const Solution* model_best,
                      const std::optional<StartPlan>& start, bool normalised, Plan& plan) {
  const Evaluation initial = simulate(graph, plan.sequence);
  PlanScore best{initial.peak_bytes, initial.cost};
  std::string returned = "default";
  auto consider = [&](Sequence sequence, std::string_view label, bool wins_ties) {
    const Evaluation e = simulate(graph, sequence);
    REMAT_CHECK(e.valid, fmt::format("moccasin: {} plan is invalid: {}", label, e.error));
    const PlanScore score{e.peak_bytes, e.cost};
    if (wins_ties ? !better_plan(best, score, budget) : better_plan(score, best, budget)) {
      best = {e.peak_bytes, e.cost};
      plan.sequence = std::move(sequence);
      returned = label;
    }
  };
  if (model_best != nullptr) consider(to_sequence(*model_best), "model", true);
  if (start) {
    const Evaluation e = simulate(graph, start->sequence);
    plan.stats.add_counter("start_peak_bytes", static_cast<double>(e.peak_bytes));
    plan.stats.add_counter("start_normalised", normalised ? 1 : 0);
    plan.stats.add_counter("start_cost", e.cost);
    consider(start->sequence, "start", false);
  }
  return returned;
}

void record_phases(SolveStats& stats, const Phases& phases) {
  const PhaseResult& phase1 = phases.phase1;
  const PhaseResult& phase2 = phases.phase2;
  stats.add_counter("phase1_solutions", static_cast<double>(phase1.solutions));
  stats.add_counter("phase1_proved", phase1.proved ? 1 : 0);
  stats.add_counter("phase2_solutions", static_cast<double>(phase2.solutions));
  stats.add_counter("phase2_proved", phase2.proved ? 1 : 0);
  stats.add_counter("failures", static_cast<double>(phase1.failures + phase2.failures));
  stats.add_counter("restarts", static_cast<double>(phase1.restarts + phase2.restarts));
  // Without a proof the search ran on (LNS restarts) until its share of the work, or the clock
  // (docs/solvers/moccasin.md, Determinism).
  for (const PhaseResult* phase : {&phase1, &phase2}) {
    if (phase->work_limit_hit) stats.stopped(StopReason::kWorkLimit);
    if (phase->time_limit_hit) stats.stopped(StopReason::kTimeLimit);
  }
}

class MoccasinSolver final : public Solver {
 public:
  explicit MoccasinSolver(const SolverDirectory& others) : others_(others) {}

  Plan solve(const Graph& graph, const SolveOptions& options) override {
    const MoccasinParams p = param_table().parse(options.params);
    Limits limits(options.work_limit, options.time_limit_s);
    const Deadline& clock = limits.deadline();
    const auto origin = std::chrono::steady_clock::now();
    Plan plan;
    plan.sequence = default_schedule(graph);
    plan.stats.status = SolveStatus::kFeasible;
    if (graph.num_nodes() == 0) return plan;

    const std::optional<StartPlan> start = find_start(graph, options, p, others_, limits);
    const double start_s = clock.elapsed_s();
    std::vector<int32_t> start_positions;
    if (start) start_positions = node_indices(start->sequence);
    bool normalised = false;
    if (start && p.fixed_order) {
      std::vector<int32_t> staged = staged_form(graph.num_nodes(), start_positions);
      normalised = staged != start_positions;
      start_positions = std::move(staged);
    }
    const Built built = build_within_gecode_range(
        graph, options.budget.bytes, static_cast<int>(p.copies), p.fixed_order,
        start ? computations(graph.num_nodes(), start_positions) : std::vector<int32_t>{});
    const Instance& inst = built.instance;
    std::optional<Solution> incumbent;
    std::string why_not;
    if (start) incumbent = to_solution(inst, start_positions, why_not);
    // Without a usable start the search starts from the default schedule, posted as a solution:
    // finding it by search costs a dive through every variable (on RL4, 1,000 nodes and 500,500
    // staged events, that dive alone outlasted phase 1's complete-search share).
    std::optional<Solution> fallback;
    if (!incumbent) {
      std::string unused;
      fallback = to_solution(inst, node_indices(default_schedule(graph)), unused);
    }
    const std::optional<Solution>& first = incumbent ? incumbent : fallback;
    const bool start_fits = incumbent && incumbent->peak <= inst.capacity;

    const Phases phases =
        run_phases(inst, p, first ? &*first : nullptr, start_fits ? &*incumbent : nullptr,
                   search_params(graph, options, p, clock), limits);
    const PhaseResult& phase1 = phases.phase1;
    const PhaseResult& phase2 = phases.phase2;
    const PhaseResult& final_phase = phase2.found ? phase2 : phase1;
    const std::string returned =
        pick_plan(graph, options.budget.bytes, final_phase.found ? &final_phase.best : nullptr,
                  start, normalised, plan);
    // Seconds from the call to the returned plan (the published MOCCASIN times are time-to-best).
    const double best_at_s =
        returned == "model" ? std::chrono::duration<double>(final_phase.best_found - origin).count()
        : returned == "start" ? start_s
                              : 0.0;
    const bool model_plan = returned == "model";
    const bool proved = model_plan && phase2.found && phase2.proved && built.exact_costs;
    plan.stats.status = proved ? SolveStatus::kOptimal : SolveStatus::kFeasible;
    plan.stats.iterations = phase1.nodes + phase2.nodes;
    record_start(plan.stats, start, incumbent.has_value(), start_fits, why_not,
                 phase1.start_used || phase2.start_used, returned == "start");
    record_phases(plan.stats, phases);
    plan.stats.add_counter("capacity_units", inst.capacity);
    plan.stats.add_counter("memory_tasks", static_cast<double>(memory_tasks(inst)));
    plan.stats.add_counter("propagations_per_unit", propagations_per_unit(inst));
    plan.stats.add_counter("size_unit_bytes", static_cast<double>(built.size_unit));
    if (start) plan.stats.stopped(start->stop_reason);
    plan.stats.work = limits.spent();
    plan.stats.add_counter("seconds_to_best", best_at_s);
    return plan;
  }

 private:
  // What became of the start plan, in the stats (an option is never silently ignored).
  static void record_start(SolveStats& stats, const std::optional<StartPlan>& start, bool mapped,
                           bool fits, const std::string& why_not, bool used, bool returned) {
    if (!start) {
      stats.lists.emplace_back("start", std::vector<std::string>{"none"});
      return;
    }
    std::string what = start->from + ": ";
    if (!mapped)
      what += "not expressible in the model (" + why_not + "); compared at the end only";
    else
      what += fits ? "the first incumbent of phase 2" : "over the capacity: phase 1 starts from it";
    stats.lists.emplace_back("start", std::vector<std::string>{what});
    stats.add_counter("start_mapped", mapped ? 1 : 0);
    stats.add_counter("start_used", used ? 1 : 0);
    stats.add_counter("returned_start", returned ? 1 : 0);
  }

  const SolverDirectory& others_;
};

}  // namespace

std::unique_ptr<Solver> make(const SolverDirectory& others) {
  return std::make_unique<MoccasinSolver>(others);
}

std::span<const ParamInfo> params() { return param_table().info(); }

}  // namespace remat::moccasin
