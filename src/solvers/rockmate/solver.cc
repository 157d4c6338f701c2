// Rockmate on a graph: blocks, options per class, rk-Rotor, lowering, judged by the simulator.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "blocks/blocks.h"
#include "options.h"
#include "remat/error.h"
#include "remat/lower.h"
#include "remat/params.h"
#include "remat/simulate.h"
#include "rockmate.h"
#include "rotor_dp/dp.h"

namespace remat::rockmate {
namespace {

constexpr std::string_view kName = "rockmate";
constexpr int kMaxBudgetRetries = 3;
constexpr double kOptionsShare = 0.5;  // of the work and time limits, for rk-Checkmate
constexpr int kBudgetSearchSteps = 6;

struct Params {
  int64_t bins = 500;
  int32_t max_stages = 100;
  bool rotor_chain = true;  // also try Rotor's own chain (no options) and keep the better plan
  std::string budgets = "10x10";
  int64_t milp_iterations = 1000;
  double milp_time_limit_s = 5;
  double milp_gap = 0.02;
  int64_t milp_max_columns = 100'000;
  std::string cache_dir;
  bool milp = true;
};

const ParamTable<Params> kTable(
    kName,
    {
        {{"bins", "500", "bins", "memory bins of the rk-Rotor DP"},
         integer(&Params::bins, 10, 100000)},
        {{"budgets", "10x10", "", "rk-Checkmate grid: M_peak values x M_save values (each 1..100)"},
         text(&Params::budgets, "PxS, e.g. 10x10")},
        {{"milp_iterations", "1000", "iterations",
          "work limit of each rk-Checkmate MILP: simplex iterations over its whole search (the "
          "same options, and plan, on any machine)"},
         integer(&Params::milp_iterations, 1)},
        {{"milp_time_limit", "5", "s",
          "wall-clock backstop of each rk-Checkmate MILP (stop_reason `time_limit` when it fires)"},
         real(&Params::milp_time_limit_s, 0, 3600, /*above_min=*/true)},
        {{"milp_gap", "0.02", "", "relative gap at which an rk-Checkmate MILP stops"},
         real(&Params::milp_gap, 0, 1)},
        {{"milp_max_columns", "100000", "columns",
          "blocks whose MILP would have more columns get none (Clp's presolve, which no time "
          "limit interrupts, took minutes on DenseNet-121's blocks); their starts are the options"},
         integer(&Params::milp_max_columns, 1)},
        {{"cache", "(none)", "", "directory of the on-disk options cache (by class hash)"},
         text(&Params::cache_dir, "a directory name")},
        {{"milp", "true", "",
          "false: options keep-all and keep-nothing only (no MILP; also the case, with a note, "
          "in a build without CBC)"},
         flag(&Params::milp)},

        {{"max_stages", "100", "blocks", "most blocks (separators thinned beyond)"},
         integer(&Params::max_stages, 2, 1000)},
        {{"rotor_chain", "true", "", "also solve Rotor's own chain and keep the better plan"},
         flag(&Params::rotor_chain)},
    });

OptionParams option_params(const Params& p, int threads) {
  OptionParams o;
  const size_t x = p.budgets.find('x');
  int64_t peak = 0, save = 0;
  if (x != std::string::npos) {
    try {
      peak = parse_int_text(p.budgets.substr(0, x));
      save = parse_int_text(p.budgets.substr(x + 1));
    } catch (const BadParamValue&) {
      peak = save = 0;
    }
  }
  if (peak < 1 || save < 1 || peak > 100 || save > 100)
    throw_bad_param(kName, "budgets", p.budgets, "PxS, e.g. 10x10, each in [1, 100]");
  o.peak_points = static_cast<int32_t>(peak);
  o.save_points = static_cast<int32_t>(save);
  o.milp_iterations = p.milp_iterations;
  o.milp_time_limit_s = p.milp_time_limit_s;
  o.milp_gap = p.milp_gap;
  o.milp_max_columns = p.milp_max_columns;
  o.cache_dir = p.cache_dir;
  o.milp = p.milp;
  o.threads = std::max(1, threads);
  return o;
}

struct StageRuns {
  std::vector<NodeId> forward, backward;
};

// A chain with the graph runs of its stages' extra options (runs[ℓ][k - 1] for option k).
struct Case {
  std::string_view label;
  const GraphChain* chain = nullptr;
  rotor::ChainArrays<int64_t> arrays;
  std::vector<std::vector<StageRuns>> runs;
};

Case plain_case(std::string_view label, const GraphChain& gc) {
  Case c{label, &gc, rotor::chain_arrays(gc.chain), {}};
  c.runs.resize(static_cast<size_t>(c.arrays.n) + 1);
  c.arrays.extra.resize(static_cast<size_t>(c.arrays.n) + 1);
  return c;
}

// Option a is no better than b anywhere the DP looks.
bool dominated(const rotor::StageOption<int64_t>& a, const rotor::StageOption<int64_t>& b) {
  return a.uf + a.ub >= b.uf + b.ub && a.abar >= b.abar && a.of >= b.of && a.ob >= b.ob &&
         a.uf >= b.uf;
}

// Adds each block's options (beyond option 0, keep-all, which the arrays already hold), measured
// on the graph, without dominated or duplicate ones.
void add_options(const Graph& g, const BlockStructure& bs,
                 const std::vector<std::vector<LocalOption>>& by_class, Case& c,
                 int64_t& options_kept) {
  for (const Block& b : bs.blocks) {
    const auto l = static_cast<size_t>(b.stage);
    const rotor::StageOption<int64_t> base = c.arrays.option(b.stage, 0);
    std::vector<rotor::StageOption<int64_t>> kept;
    std::vector<StageRuns> kept_runs;
    for (const LocalOption& lo : by_class[static_cast<size_t>(b.class_id)]) {
      StageRuns runs;
      for (int32_t i : lo.forward) runs.forward.push_back(b.nodes[static_cast<size_t>(i)]);
      for (int32_t i : lo.backward) runs.backward.push_back(b.nodes[static_cast<size_t>(i)]);
      const StageRunFigures f =
          measure_stage_runs(g, *c.chain, b.stage, runs.forward, runs.backward);
      // Never faster than every node once (the DP's saturation relies on it).
      const double least = base.uf + base.ub;
      rotor::StageOption<int64_t> o{f.u_f, std::max(f.u_b, least - f.u_f), f.abar, f.o_f, f.o_b};
      if (dominated(o, base)) continue;
      bool drop = false;
      for (const auto& k : kept) drop |= dominated(o, k);
      if (drop) continue;
      for (size_t i = kept.size(); i-- > 0;)
        if (dominated(kept[i], o)) {
          kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(i));
          kept_runs.erase(kept_runs.begin() + static_cast<std::ptrdiff_t>(i));
        }
      kept.push_back(o);
      kept_runs.push_back(std::move(runs));
    }
    options_kept += static_cast<int64_t>(kept.size());
    c.arrays.extra[l] = std::move(kept);
    c.runs[l] = std::move(kept_runs);
  }
}

Sequence lower(const Graph& g, const Case& c, std::span<const ChainOp> ops,
               std::span<const int32_t> options) {
  const GraphChain& gc = *c.chain;
  std::vector<uint8_t> ran(gc.stages.size() + 1, 0);
  Sequence seq;
  for (size_t i = 0; i < ops.size(); ++i) {
    const ChainOp op = ops[i];
    const int32_t k = i < options.size() ? options[i] : 0;
    const auto l = static_cast<size_t>(op.stage);
    const StageNodes& nodes = gc.stages[l - 1];
    if (op.kind == ChainOpKind::kBackward) {
      const auto& run = k == 0 ? nodes.backward : c.runs[l][static_cast<size_t>(k) - 1].backward;
      seq.insert(seq.end(), run.begin(), run.end());
      continue;
    }
    const auto& run = (op.kind == ChainOpKind::kForwardAll && k > 0)
                          ? c.runs[l][static_cast<size_t>(k) - 1].forward
                          : nodes.forward;
    const bool first = !ran[l];
    ran[l] = 1;
    for (NodeId n : run)
      if (first || g.node(n).recomputable) seq.push_back(n);
  }
  return seq;
}

struct Attempt {
  Sequence sequence;
  Evaluation eval;
  int64_t chain_budget = 0;
  int64_t dp_memory = 0;  // the DP's memory for the plan: binned budget + resident bytes
  double dp_makespan = 0;
  ChainSequence ops;
  std::vector<int32_t> options;
  bool found = false;
};

// Within the budget: the cheaper. Over it: the lower peak, where peaks closer than `resolution`
// (one DP bin: the DP cannot tell them apart) count as equal and the cheaper wins. Without that,
// on ResNet-18 a least-memory plan 500 bytes lower but twice as costly beat Rotor's.
bool better(const Attempt& a, const Attempt& b, int64_t budget, int64_t resolution = 0) {
  if (a.found != b.found) return a.found;
  const bool a_fits = a.eval.peak_bytes <= budget, b_fits = b.eval.peak_bytes <= budget;
  if (a_fits != b_fits) return a_fits;
  if (a_fits || std::abs(a.eval.peak_bytes - b.eval.peak_bytes) <= resolution)
    return a.eval.cost < b.eval.cost;
  return a.eval.peak_bytes < b.eval.peak_bytes;
}

// The DP at `chain_budget` with the work `limits` has left (spent from it) and its clock.
Attempt attempt_at(const Graph& g, const Case& c, int64_t chain_budget, int64_t bins,
                   Limits& limits) {
  Attempt a;
  a.chain_budget = chain_budget;
  const rotor::Discretisation d = rotor::discretise(c.arrays, chain_budget, bins);
  const rotor::DpOutcome dp =
      rotor::persistent_dp(d, rotor::PersistentFamily::kRotor,
                           {.deadline = &limits.deadline(),
                            .max_relaxed = work_ops(limits.left(), rotor::kRelaxedPerUnit)});
  limits.spend(static_cast<double>(dp.relaxed) / rotor::kRelaxedPerUnit);
  if (dp.work_limit_hit) limits.note_work_limit();
  if (!dp.ops) return a;
  a.found = true;
  a.ops = *dp.ops;
  a.options = dp.options;
  a.dp_makespan = dp.makespan;
  a.dp_memory = d.budget_bins * d.bin_bytes + c.chain->resident_bytes;
  a.sequence = lower(g, c, a.ops, a.options);
  a.eval = simulate(g, a.sequence);
  REMAT_CHECK(a.eval.valid, fmt::format("rockmate: the lowered plan is invalid: {}", a.eval.error));
  return a;
}

// The least-memory plan of the chain, lowered.
Attempt least_memory(const Graph& g, const Case& c) {
  const rotor::MinMemory least =
      rotor::persistent_min_memory(c.arrays, rotor::PersistentFamily::kRotor);
  Attempt a;
  a.found = true;
  a.ops = least.ops;
  a.options = least.options;
  a.dp_memory = least.bytes + c.chain->resident_bytes;
  a.chain_budget = least.bytes;
  a.sequence = lower(g, c, a.ops, a.options);
  a.eval = simulate(g, a.sequence);
  REMAT_CHECK(a.eval.valid, fmt::format("rockmate: the lowered plan is invalid: {}", a.eval.error));
  return a;
}

// rk-Rotor on one chain: the DP at the budget left by the resident bytes, retried lower when the
// lowered plan is over (counter `bound_violations`: never expected), then a bisection above it,
// since the chain over-counts, keeping the best plan; the least-memory plan when nothing fits.
// Where the DP finds nothing at that budget, the chain's least-memory plan tells how much it
// over-counts (its DP memory against its simulated peak), and the bisection runs over that much
// more: on a transformer whose layers hand on a value their backward never reads, the chain's
// least memory was above the budget while the graph's peak was well below it.
Attempt solve_case(const Graph& g, const Case& c, int64_t budget, int64_t bins, Limits& limits,
                   int64_t& violations, int64_t& dp_solves) {
  Attempt best;
  int64_t chain_budget = std::max<int64_t>(0, budget - c.chain->resident_bytes);
  for (int i = 0; i <= kMaxBudgetRetries; ++i) {
    Attempt a = attempt_at(g, c, chain_budget, bins, limits);
    ++dp_solves;
    const bool over = a.found && a.eval.peak_bytes > budget;
    if (better(a, best, budget) || !best.found) best = std::move(a);
    if (!over || limits.stop()) break;
    ++violations;
    chain_budget -= best.eval.peak_bytes - budget;
    if (chain_budget < 0) break;
  }
  int64_t lo = best.chain_budget, hi = lo;
  if (best.found && best.eval.peak_bytes <= budget) {
    const ChainEvaluation store_all =
        simulate_chain(c.chain->chain, store_all_sequence(c.chain->chain));
    const int64_t excess = store_all.peak_bytes + c.chain->resident_bytes - baseline(g).peak_bytes;
    // The chain also over-counts where store-all does not show it (its options' peaks): the
    // lowered plan's room below the budget widens the search.
    const int64_t room = budget - best.eval.peak_bytes;
    hi = lo + std::max<int64_t>(excess, 0) + room;
  } else if (!best.found) {
    Attempt least = least_memory(g, c);
    if (least.eval.peak_bytes <= budget)
      hi = lo + std::max<int64_t>(least.dp_memory - least.eval.peak_bytes, 0) +
           (budget - least.eval.peak_bytes);
    best = std::move(least);
  }
  for (int i = 0; i < kBudgetSearchSteps && hi - lo > 1 && !limits.stop(); ++i) {
    const int64_t mid = lo + (hi - lo) / 2;
    Attempt a = attempt_at(g, c, mid, bins, limits);
    ++dp_solves;
    const bool fits = a.found && a.eval.peak_bytes <= budget;
    if (better(a, best, budget)) best = std::move(a);
    // Nothing found: the chain budget is below the chain's least memory, so search above it.
    (fits || !a.found ? lo : hi) = mid;
  }
  if (!best.found) best = least_memory(g, c);
  return best;
}

std::string describe_ops(std::span<const ChainOp> ops, std::span<const int32_t> options) {
  std::string out;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!out.empty()) out += ' ';
    out += format_sequence(ops.subspan(i, 1));
    if (i < options.size() && options[i] > 0) out += fmt::format("/o{}", options[i]);
  }
  return out;
}

class RockmateSolver : public Solver {
 public:
  Plan solve(const Graph& g, const SolveOptions& options) override {
    const Params params = kTable.parse(options.params);
    const OptionParams option_settings = option_params(params, options.threads);
    Limits limits(options.work_limit, options.time_limit_s);
    const BlockStructure bs = build_blocks(g, params.max_stages);
    const int64_t budget = options.budget.bytes;
    Plan plan;
    SolveStats& st = plan.stats;
    add_block_stats(bs, st);
    Sequence store_all = lower_chain_plan(g, bs.chain, store_all_runs(bs.chain));
    if (simulate(g, store_all).peak_bytes <= budget) {
      plan.sequence = std::move(store_all);  // every node once: nothing is cheaper
      st.add_counter("store_all", 1);
      if (!bs.chain.note.empty()) st.lists.emplace_back("notes", std::vector{bs.chain.note});
      return plan;
    }
    OptionStats ostats;
    // The MILPs get at most half the work and time; the DPs and lowering need the rest.
    const std::vector<std::vector<LocalOption>> by_class =
        class_options(g, bs, option_settings, limits.part(kOptionsShare), options.cache, ostats);
    limits.spend(ostats.work);
    Case rk = plain_case("rockmate", bs.chain);
    int64_t options_kept = 0;
    add_options(g, bs, by_class, rk, options_kept);
    int64_t violations = 0, dp_solves = 0;
    Attempt best = solve_case(g, rk, budget, params.bins, limits, violations, dp_solves);
    bool rotor_won = false;
    std::optional<GraphChain> rotor_chain;
    if (params.rotor_chain) {
      // Rotor's own chain (gradient sums placed early), with keep-all only: exactly Rotor's DP,
      // so the plan is never worse than rotor's at the same budget and bins.
      rotor_chain = extract_chain(g, {.max_stages = params.max_stages});
      const Case rc = plain_case("rotor chain", *rotor_chain);
      Attempt a = solve_case(g, rc, budget, params.bins, limits, violations, dp_solves);
      if (better(a, best, budget, budget / params.bins)) best = std::move(a), rotor_won = true;
    }
    const Baseline base = baseline(g);
    if (best.eval.peak_bytes > budget && best.eval.peak_bytes >= base.peak_bytes) {
      plan.sequence = default_schedule(g);  // never worse than the default schedule
      st.add_counter("used_default_schedule", 1);
    } else {
      plan.sequence = std::move(best.sequence);
    }
    st.add_counter("milp_available", milp_available() ? 1 : 0);
    std::vector<std::string> notes;
    if (!bs.chain.note.empty()) notes.push_back(bs.chain.note);
    if (params.milp && !milp_available())
      notes.emplace_back(
          "rk-Checkmate needs CBC and this build has none (REMAT_WITH_CBC off): every block has "
          "keep-all and keep-nothing only, i.e. Rotor's DP over the blocks");
    if (!notes.empty()) st.lists.emplace_back("notes", std::move(notes));
    st.add_counter("milp_runs", static_cast<double>(ostats.milp_runs));
    st.add_counter("milp_feasible", static_cast<double>(ostats.milp_feasible));
    st.add_counter("milp_reused", static_cast<double>(ostats.milp_reused));
    st.add_counter("options_from_start", static_cast<double>(ostats.options_from_start));
    st.add_counter("options_greedy", static_cast<double>(ostats.options_greedy));
    st.add_counter("classes_too_large", static_cast<double>(ostats.classes_too_large));
    // The option grid or a MILP the wall clock stopped: the options, and so the plan, may differ on
    // another machine; a MILP its work limit stopped ends at the same point on any machine. A MILP
    // that milp_iterations stopped (counter milp_work_limit_stops) ran its own cap, which a larger
    // work limit does not raise: only the solve's work ending the grid or the DPs is work_limit.
    if (ostats.timed_out || ostats.wall_clock_stops > 0 || limits.expired())
      st.stopped(StopReason::kTimeLimit);
    if (ostats.grid_work_limit || limits.out_of_work()) st.stopped(StopReason::kWorkLimit);
    st.work = limits.spent();
    st.add_counter("milp_work_limit_stops", static_cast<double>(ostats.work_limit_stops));
    st.add_counter("options_cache_memory_hits", static_cast<double>(ostats.memory_hits));
    st.add_counter("options_cache_disk_hits", static_cast<double>(ostats.disk_hits));
    st.add_counter("options_kept", static_cast<double>(options_kept));
    st.add_counter("dp_solves", static_cast<double>(dp_solves));
    st.add_counter("dp_memory_bound", static_cast<double>(best.dp_memory));
    st.add_counter("dp_makespan", best.dp_makespan);
    st.add_counter("chain_budget", static_cast<double>(best.chain_budget));
    st.add_counter("bound_violations", static_cast<double>(violations));
    st.add_counter("rotor_chain_won", rotor_won ? 1 : 0);
    std::vector<std::string> runs;
    for (size_t c = 0; c < ostats.runs_per_class.size(); ++c)
      runs.push_back(fmt::format("class {}: {} MILPs, {} options", c, ostats.runs_per_class[c],
                                 by_class[c].size()));
    st.lists.emplace_back("milp_runs_per_class", std::move(runs));
    st.lists.emplace_back("chain_ops",
                          std::vector<std::string>{describe_ops(best.ops, best.options)});
    return plan;
  }

 private:
  static void add_block_stats(const BlockStructure& bs, SolveStats& st) {
    st.add_counter("blocks", static_cast<double>(bs.blocks.size()));
    st.add_counter("block_classes", static_cast<double>(bs.classes.size()));
    std::vector<std::string> sizes;
    for (const Block& b : bs.blocks)
      sizes.push_back(fmt::format("{}: class {}, {} forward + {} backward nodes", b.stage,
                                  b.class_id, b.num_forward,
                                  static_cast<int32_t>(b.nodes.size()) - b.num_forward));
    st.lists.emplace_back("blocks", std::move(sizes));
  }
};

}  // namespace

std::unique_ptr<Solver> make_rockmate(const SolverDirectory&) {
  return std::make_unique<RockmateSolver>();
}

std::span<const ParamInfo> params() { return kTable.info(); }

}  // namespace remat::rockmate
