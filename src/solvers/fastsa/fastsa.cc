#include "fastsa.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <optional>
#include <thread>

#include "anneal.h"
#include "params.h"
#include "remat/error.h"
#include "units.h"

namespace remat::fastsa {
namespace {

// When nothing fits, stage 2 starts from the memory pass's plan only if its peak is lower than
// the groups' strict plan's by this fraction of the baseline peak: a slightly lower peak bought
// with recomputation chosen for memory alone is lost again in stage 2 at a higher cost.
constexpr double kClearlyLowerPeak = 0.01;

struct WalkResult {
  Sequence sequence;
  SolveStats stats;
};

void add_stage_counters(SolveStats& stats, std::string_view name, const StageResult& r,
                        int32_t slots) {
  stats.add_counter(fmt::format("{}_iterations", name), static_cast<double>(r.iterations));
  stats.add_counter(fmt::format("{}_valid_mutations", name), static_cast<double>(r.applied));
  stats.add_counter(fmt::format("{}_accepted_moves", name), static_cast<double>(r.accepted));
  stats.add_counter(fmt::format("{}_seconds", name), r.seconds);
  stats.add_counter(fmt::format("{}_slots", name), slots);
  stats.add_counter(fmt::format("{}_converged", name), r.converged ? 1 : 0);
}

class Walk {
 public:
  Walk(const Graph& g, const FastsaParams& p, const SolveOptions& options,
       std::span<const NodeId> start, const Deadline& deadline, uint64_t seed, bool reports)
      : g_(g), p_(p), options_(options), start_(start) {
    context_.moves_left = work_ops(options.work_limit, kMovesPerUnit);
    context_.budget_bytes = options.budget.bytes;
    context_.objective.kind = p.mode == Mode::kOrder ? Objective::kMemory : p.objective;
    context_.objective.budget = static_cast<double>(std::max<int64_t>(1, options.budget.bytes));
    context_.rng = Rng(seed);
    context_.deadline = &deadline;
    if (reports) context_.on_progress = options.on_progress;
  }

  WalkResult run() {
    WalkResult out;
    const std::optional<UnitTable> units = node_units(g_, context_.deadline);
    if (!units) {  // the clock ran out while setting up: the default schedule
      context_.time_limit_hit = true;
      out.sequence = default_schedule(g_);
      add_totals(out.stats, {}, {});
      return out;
    }
    const UnitTable& nodes = *units;
    StageSettings s2 = base_settings();
    StageResult first, second;
    const std::vector<int32_t> given_start = node_indices(start_);
    if (p_.mode == Mode::kOrder) {
      s2.iterations = p_.stage1_iterations;
      s2.rotations_only = true;
      s2.slots = slots_for(nodes.num_units(), p_.slots);
      s2.convergence_window = window(nodes.num_units());
      second = stage(nodes, start_.empty() ? nodes.initial_order : given_start, s2, "order");
      add_stage_counters(out.stats, "order", second, s2.slots);
    } else {
      std::vector<int32_t> start;
      if (start_.empty()) {
        start = run_first_stage(nodes, out.stats, first);
        s2.initial_temperature =
            p_.stage2_from_stop ? first.stop_temperature : first.final_temperature;
      } else {
        // A given plan: stage 2 from it when it fits, else stage 1 on single nodes from it (its
        // recomputations cannot be expressed as groups). Stage 2 then starts at the initial
        // temperature scale of the start's objective, as stage 1 would.
        start = given_start;
        if (!within_budget(simulate(g_, start_).peak_bytes)) {
          StageSettings s1 = base_settings();
          s1.iterations = p_.stage1_iterations;
          s1.stop_when_feasible = p_.stop_at_budget;
          s1.slots = slots_for(static_cast<int64_t>(start.size()), p_.slots);
          s1.convergence_window = window(nodes.num_units());
          first = stage(nodes, given_start, s1, "stage 1");
          add_stage_counters(out.stats, "stage1", first, s1.slots);
          start = first.best_order;
          s2.initial_temperature = first.stop_temperature;
        }
      }
      s2.iterations = p_.stage2_iterations;
      s2.keep_within_budget = p_.stage2_keep_budget;
      if (p_.carry_over_iterations && !first.time_limit_hit && !first.work_limit_hit)
        s2.iterations += p_.stage1_iterations - first.iterations;
      s2.slots = slots_for(static_cast<int64_t>(start.size()), p_.slots);
      s2.convergence_window = window(nodes.num_units());
      second = stage(nodes, start, s2, "stage 2");
      add_stage_counters(out.stats, "stage2", second, s2.slots);
    }
    out.sequence = nodes.expand(second.best_order);
    add_totals(out.stats, first, second);
    out.stats.add_counter("started_from_plan", start_.empty() ? 0 : 1);
    out.stats.add_counter("convergence_window", static_cast<double>(window(nodes.num_units())));
    return out;
  }

 private:
  StageSettings base_settings() const {
    const double soft_scale =
        p_.logaddexp
            ? p_.logaddexp_peak / static_cast<double>(std::max<int64_t>(1, baseline(g_).peak_bytes))
            : 0;
    StageSettings s{.initial_temperature_fraction = p_.initial_temperature_pct / 100,
                    .final_temperature_ratio = p_.final_temperature_pct / 100,
                    .soft_peak_scale = soft_scale};
    s.local_rotations = p_.local_rotations;
    s.fixed_order = p_.mode == Mode::kFixedOrder;
    if (p_.converge && p_.mode != Mode::kOrder) s.least_cost = least_cost_;
    return s;
  }

  // run_stage, unless the clock ran out already: then the stage is not set up (on a graph of a
  // million nodes that alone is a tenth of a second) and its plan is its start.
  StageResult stage(const UnitTable& units, std::span<const int32_t> start,
                    const StageSettings& settings, std::string_view name) {
    if (!context_.deadline->expired()) return run_stage(units, start, settings, name, context_);
    StageResult r;
    r.best_order.assign(start.begin(), start.end());
    r.time_limit_hit = context_.time_limit_hit = true;
    return r;
  }

  // A limit cut the stage short: the stages after it are not run.
  static bool cut_short(const StageResult& r) { return r.time_limit_hit || r.work_limit_hit; }

  int64_t window(int64_t units) const {
    if (!p_.converge) return 0;
    return p_.convergence_window > 0 ? p_.convergence_window : window_for(units);
  }

  // Stage 1 on grouped nodes, stopping at the budget. Groups cannot be split, so when they
  // cannot reach the budget in half of stage 1's iterations (App. D.6 notes this limit of
  // grouping), single nodes anneal from the default schedule for the other half, and stage 2
  // starts from their plan if it fits. Between the two, the memory pass (run_memory_pass) anneals
  // the groups further; its plan is the start when it fits and the single nodes' does not. When
  // nothing fits, stage 2 starts from the groups' plan (its recomputations are what stage 2
  // needs to work with), or from the pass's if its peak is clearly lower (kClearlyLowerPeak).
  // A pass over budget never changes the single nodes' run (its iterations are not taken from
  // theirs, the random stream is restored), so where its plan is not the start, the plan is the
  // one without it. Any pass caps the single nodes' run (stage1_fallback_windows). Single nodes
  // that end over the budget are set aside in the same way (set_aside_over_budget), so the cap
  // never changes a plan where their run would not have fitted. Returns the start as node ids;
  // `used` sums the iterations and time of the parts that count.
  std::vector<int32_t> run_first_stage(const UnitTable& nodes, SolveStats& stats,
                                       StageResult& used) {
    // Groups recompute fused nodes inside each reader, which moves first computations.
    const bool use_groups = p_.group_nodes && p_.mode != Mode::kFixedOrder;
    std::optional<UnitTable> groups;
    if (use_groups) {
      groups = group_units(g_, {.max_group_size = p_.max_group_size}, context_.deadline);
      if (!groups) {  // the clock ran out while grouping: the default schedule
        used.time_limit_hit = context_.time_limit_hit = true;
        return nodes.initial_order;
      }
    }
    const UnitTable& units = use_groups ? *groups : nodes;
    stats.add_counter("groups", units.num_units());
    stats.add_counter("grouped_nodes", static_cast<double>(units.members.size()));
    const bool may_fall_back = use_groups && p_.stage1_fallback && p_.stop_at_budget;
    StageSettings s1 = base_settings();
    s1.iterations = may_fall_back ? p_.stage1_iterations / 2 : p_.stage1_iterations;
    s1.stop_when_feasible = p_.stop_at_budget;
    s1.slots = slots_for(units.num_units(), p_.slots);
    s1.convergence_window = window(units.num_units());
    if (use_groups)
      s1.exact_peak = [&](const std::vector<int32_t>& order) {
        return simulate(g_, units.expand(order)).peak_bytes;
      };
    used = stage(units, units.initial_order, s1, "stage 1");
    add_stage_counters(stats, "stage1", used, s1.slots);
    // Node units are numbered as the graph's nodes, so an expansion is already a unit order.
    std::vector<int32_t> start = node_indices(units.expand(used.best_order));
    if (!may_fall_back || cut_short(used)) return start;
    const int64_t grouped_peak = simulate(g_, nodes.expand(start)).peak_bytes;
    stats.add_counter("stage1_groups_peak", static_cast<double>(grouped_peak));
    if (within_budget(grouped_peak)) return start;

    std::optional<MemoryPlan> memory;
    auto memory_or_groups = [&] {
      if (!memory) return start;
      const double peak_drop = static_cast<double>(grouped_peak - memory->peak);
      if (!within_budget(memory->peak) &&
          peak_drop < kClearlyLowerPeak * static_cast<double>(baseline(g_).peak_bytes))
        return start;
      used.stop_temperature = memory->stop_temperature;
      used.final_temperature = memory->final_temperature;
      return memory->order;
    };
    if (p_.stage1_memory_pass) {
      StageSettings pass_settings = s1;
      pass_settings.iterations = p_.stage1_iterations - used.iterations;
      // Its peak falls in thousands of small steps: an exact check at each was a quarter of its
      // time (random layered, 6,000 nodes at 70 %).
      pass_settings.exact_peak_step = options_.budget.bytes / 1000;
      pass_settings.peak_moves = p_.memory_pass_peak_moves;
      // It starts hot from the groups' cold plan (StageSettings::quench_in_full says why).
      pass_settings.quench_in_full = true;
      memory = run_memory_pass(nodes, units, used.best_order, pass_settings, stats, used);
      if (cut_short(used)) return memory_or_groups();
    }
    StageSettings fallback_settings = s1;
    fallback_settings.exact_peak = nullptr;
    fallback_settings.iterations = p_.stage1_iterations - used.iterations;
    fallback_settings.slots = slots_for(nodes.num_units(), p_.slots);
    fallback_settings.convergence_window = window(nodes.num_units());
    // After a memory pass, the single nodes run at most stage1_fallback_windows convergence
    // windows. Their plan counts only when it fits; where it fitted it did so early
    // (stop_at_budget ends it there), while the runs that ended over the budget spent many
    // windows for nothing, whether the pass's plan fitted or not (bench/fastsa_fallback_bench.py
    // measures both).
    if (memory)
      fallback_settings.iteration_cap =
          p_.stage1_fallback_windows * fallback_settings.convergence_window;
    if (fallback_settings.iterations > 0) {
      const Rng rng_before = context_.rng;
      const StageResult fallback =
          stage(nodes, nodes.initial_order, fallback_settings, "stage 1 (nodes)");
      add_stage_counters(stats, "stage1_fallback", fallback, fallback_settings.slots);
      stats.add_counter("stage1_fallback_peak", static_cast<double>(fallback.best_peak));
      stats.add_counter("stage1_fallback_capped", fallback.capped ? 1 : 0);
      if (fits(nodes, fallback.best_order)) {
        add_part(used, fallback);
        return fallback.best_order;
      }
      set_aside_over_budget(fallback, rng_before, used);
    }
    return memory_or_groups();
  }

  // A part of stage 1 that ended over the budget (a memory pass, the single nodes' fallback)
  // leaves no trace but its counters and work: the random stream is restored, its iterations are
  // nobody's (stage 2 gets what the parts that count left: carry_over_iterations), and stage 2
  // starts at the temperature of the plan it starts from. So however soon the fallback ended
  // (iteration_cap), stage 2 runs as without it.
  void set_aside_over_budget(const StageResult& part, const Rng& rng_before, StageResult& used) {
    context_.rng = rng_before;
    used.time_limit_hit = part.time_limit_hit;
    used.work_limit_hit = part.work_limit_hit;
    add_work(over_budget_parts_, part);
  }

  // What a memory pass reached, with the temperatures stage 2 would start from.
  struct MemoryPlan {
    std::vector<int32_t> order;  // node ids
    int64_t peak = 0;
    double stop_temperature = 0, final_temperature = 0;
  };

  // The strict objective weighs the peak against cost^0.6, so stage 1 takes a recomputation only
  // when it lowers the peak about as much as it raises the cost. On large graphs with a low
  // memory lower bound that stalls short of the budget (random layered graphs of thousands of
  // nodes at 70 %). This pass anneals the groups from the plan reached with the
  // cost exponent at 0 (the same Elu shape at the budget, memory alone) until the budget is met;
  // stage 2 then removes what recomputation it can. Its temperatures are in bytes, so the point
  // of the schedule where it stopped is carried over to the strict objective's scale.
  // Over budget its iterations count in the totals only and the random stream is restored, so
  // the single nodes run as without it.
  MemoryPlan run_memory_pass(const UnitTable& nodes, const UnitTable& units,
                             std::span<const int32_t> from, const StageSettings& settings,
                             SolveStats& stats, StageResult& used) {
    const Rng rng_before = context_.rng;
    const double strict_exponent = context_.objective.cost_exponent;
    context_.objective.cost_exponent = 0;
    const StageResult pass = stage(units, from, settings, "stage 1 (memory)");
    context_.objective.cost_exponent = strict_exponent;
    add_stage_counters(stats, "stage1_memory", pass, settings.slots);
    MemoryPlan plan{.order = node_indices(units.expand(pass.best_order))};
    const Evaluation e = simulate(g_, nodes.expand(plan.order));
    plan.peak = e.peak_bytes;
    stats.add_counter("stage1_memory_peak", static_cast<double>(plan.peak));
    const double strict_scale = p_.initial_temperature_pct / 100 *
                                context_.objective(static_cast<double>(e.peak_bytes), e.cost);
    plan.stop_temperature = strict_scale * pass.stop_temperature / pass.initial_temperature;
    plan.final_temperature = strict_scale * p_.final_temperature_pct / 100;
    if (within_budget(plan.peak)) {
      add_work(used, pass);
    } else {
      set_aside_over_budget(pass, rng_before, used);
    }
    return plan;
  }

  bool within_budget(int64_t peak) const { return peak <= options_.budget.bytes; }
  bool fits(const UnitTable& nodes, std::span<const int32_t> order) const {
    return within_budget(simulate(g_, nodes.expand(order)).peak_bytes);
  }

  // Adds the iterations and time of a later part of stage 1 to `used`.
  static void add_work(StageResult& used, const StageResult& part) {
    used.iterations += part.iterations;
    used.accepted += part.accepted;
    used.applied += part.applied;
    used.seconds += part.seconds;
    used.time_limit_hit = part.time_limit_hit;
    used.work_limit_hit = part.work_limit_hit;
  }

  // The same for the part whose plan stage 2 starts from: its temperatures become stage 1's.
  static void add_part(StageResult& used, const StageResult& part) {
    add_work(used, part);
    used.initial_temperature = part.initial_temperature;
    used.stop_temperature = part.stop_temperature;
    used.final_temperature = part.final_temperature;
  }

  void add_totals(SolveStats& stats, const StageResult& first, const StageResult& second) {
    const int64_t iterations = first.iterations + second.iterations + over_budget_parts_.iterations;
    const double seconds = first.seconds + second.seconds + over_budget_parts_.seconds;
    stats.iterations = iterations;
    stats.add_counter("accepted_moves", static_cast<double>(first.accepted + second.accepted +
                                                            over_budget_parts_.accepted));
    stats.add_counter("mutations_per_second",
                      seconds > 0 ? static_cast<double>(iterations) / seconds : 0);
    if (context_.time_limit_hit) stats.stopped(StopReason::kTimeLimit);
    if (context_.work_limit_hit) stats.stopped(StopReason::kWorkLimit);
    stats.work =
        static_cast<double>(work_ops(options_.work_limit, kMovesPerUnit) - context_.moves_left) /
        kMovesPerUnit;
    stats.add_counter("converged", second.converged ? 1 : 0);
    stats.add_counter("reached_cost_lower_bound", second.at_least_cost ? 1 : 0);
    stats.series = {{"convergence_time_s", std::move(context_.series_time_s)},
                    {"convergence_iteration", std::move(context_.series_iteration)},
                    {"convergence_best_objective", std::move(context_.series_best_objective)},
                    {"convergence_best_peak_bytes", std::move(context_.series_peak)}};
  }

  const Graph& g_;
  const FastsaParams& p_;
  const SolveOptions& options_;
  std::span<const NodeId> start_;  // empty: from the default schedule
  double least_cost_ = cost_lower_bound(g_);
  WalkContext context_;
  // Stage 1's parts that ended over the budget and were set aside (a memory pass, the single
  // nodes' fallback): in the totals only.
  StageResult over_budget_parts_;
};

// mode=fixed-order keeps first computations where they are: a start must have them in the
// default order already.
void check_default_order(const Graph& graph, std::span<const NodeId> start) {
  IdVector<NodeId, char> seen(static_cast<size_t>(graph.num_nodes()), 0);
  int32_t next_first = 0;
  for (size_t i = 0; i < start.size(); ++i) {
    const NodeId n = start[i];
    if (seen[n]) continue;
    seen[n] = 1;
    if (n.value() != next_first)
      throw InputError(fmt::format(
          "fastsa: mode=fixed-order needs a start plan whose first computations follow the "
          "default order; step {} first computes node '{}' where node '{}' was due",
          i, graph.node(n).name, graph.node(NodeId{next_first}).name));
    ++next_first;
  }
}

class FastsaSolver final : public Solver {
 public:
  Plan solve(const Graph& graph, const SolveOptions& options) override {
    const FastsaParams params = parse_fastsa_params(options.params);
    const Sequence& start = options.start;
    if (params.mode == Mode::kFixedOrder) check_default_order(graph, start);
    const Deadline deadline(options.time_limit_s);
    const int walks = std::max(1, options.threads);
    std::vector<WalkResult> results(static_cast<size_t>(walks));
    std::vector<std::exception_ptr> errors(static_cast<size_t>(walks));
    std::vector<char> ran(static_cast<size_t>(walks), 0);
    auto run_walk = [&](int i) {
      // Walk 0 always runs; the others start only while time is left, so many threads cannot
      // stretch the time limit by setting up walks that get no iterations.
      if (i > 0 && deadline.expired()) return;
      ran[static_cast<size_t>(i)] = 1;
      try {
        Walk walk(graph, params, options, start, deadline,
                  derive_seed(options.seed, static_cast<uint64_t>(i)),
                  /*reports=*/i == 0);
        results[static_cast<size_t>(i)] = walk.run();
      } catch (...) {
        errors[static_cast<size_t>(i)] = std::current_exception();
      }
    };
    // At most one walk per hardware thread at a time (each holds its own state); which thread
    // runs a walk does not matter, its seed and slot in `results` are fixed by its index.
    std::atomic<int> next_walk{1};
    auto take_walks = [&] {
      for (int i = next_walk.fetch_add(1); i < walks; i = next_walk.fetch_add(1)) run_walk(i);
    };
    const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    std::vector<std::thread> workers;
    for (int k = 1; k < std::min(walks, hardware); ++k) workers.emplace_back(take_walks);
    run_walk(0);  // on the caller's thread, which also reports progress
    take_walks();
    for (std::thread& w : workers) w.join();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);

    // The walks' plans by the simulator (one walk's needs no simulation here: the judged solve
    // measures the plan, and on a large graph a simulation is a good part of a short time limit).
    size_t best = 0;
    if (results.size() > 1) {
      std::vector<PlanScore> scores(results.size());
      for (size_t i = 0; i < results.size(); ++i)
        if (ran[i]) {
          const Evaluation e = simulate(graph, results[i].sequence);
          scores[i] = {e.peak_bytes, e.cost};
        }
      for (size_t i = 1; i < results.size(); ++i)
        if (ran[i] && better_plan(scores[i], scores[best], options.budget.bytes)) best = i;
    }
    // Each walk has the whole work limit (they run side by side): the solve's work is the most
    // any walk spent.
    double work = 0;
    for (size_t i = 0; i < results.size(); ++i)
      if (ran[i]) work = std::max(work, results[i].stats.work);
    Plan plan;
    plan.sequence = std::move(results[best].sequence);
    plan.stats = std::move(results[best].stats);
    plan.stats.work = work;
    plan.stats.status = SolveStatus::kFeasible;  // the judged solve sets it from the simulator
    plan.stats.cost_lower_bound = cost_lower_bound(graph);
    const auto walks_run = std::count(ran.begin(), ran.end(), 1);
    plan.stats.add_counter("walks", walks);
    plan.stats.add_counter("walks_run", static_cast<double>(walks_run));
    // Walks the time limit left unstarted would have been candidates on a faster machine.
    if (walks_run < walks) plan.stats.stopped(StopReason::kTimeLimit);
    plan.stats.add_counter("best_walk", static_cast<double>(best));
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> make(const SolverDirectory&) { return std::make_unique<FastsaSolver>(); }

std::span<const ParamInfo> params() { return fastsa_param_table().info(); }

}  // namespace remat::fastsa
