#include "option_grid.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>

#ifdef REMAT_HAVE_CBC
#include "checkmate_model/formulation.h"
#include "milp/milp.h"
#endif
#include "remat/simulate.h"

namespace remat::rockmate {
namespace {

struct Found {
  Sequence plan;
  int64_t peak = 0, at_loss = 0;  // simulated peak and memory at the loss step
  double cost = 0;
  bool valid = true;  // false: the simulator rejected the plan (the figures are unset)
};

Found measure(const Graph& sub, const BlockModel& bm, Sequence plan) {
  const Evaluation e = simulate(sub, plan, {.timeline = true});
  Found f{std::move(plan), e.peak_bytes, 0, e.cost, e.valid};
  if (!e.valid) return f;
  for (size_t i = 0; i < f.plan.size(); ++i)
    if (f.plan[i].value() == bm.loss) f.at_loss = e.timeline[i];
  return f;
}

// Keep-nothing on the block graph: the forward, the loss, the forward again, the backward. It
// holds the least at the loss, so it warm-starts the MILPs of tight M_save (without a start CBC
// often finds nothing in the time of one grid point).
Sequence keep_nothing_sequence(const Graph& sub, const BlockModel& bm) {
  Sequence seq;
  for (int32_t i = 0; i <= bm.loss; ++i) seq.push_back(NodeId{i});
  for (int32_t i = 0; i < bm.loss; ++i)
    if (sub.node(NodeId{i}).recomputable) seq.push_back(NodeId{i});
  for (int32_t i = bm.loss + 1; i < sub.num_nodes(); ++i) seq.push_back(NodeId{i});
  return seq;
}

#ifdef REMAT_HAVE_CBC
// The forward, the loss, then the backward where each forward value that `kept` does not mark is
// recomputed (with what it needs that is not kept either) right before the first backward step
// that reads it. Empty when such a value's producer may not run twice.
Sequence keep_only(const Graph& sub, const BlockModel& bm, const IdVector<ValueId, uint8_t>& kept) {
  Sequence seq;
  for (int32_t i = 0; i <= bm.loss; ++i) seq.push_back(NodeId{i});
  IdVector<ValueId, uint8_t> ready(kept.size(), 0);  // values recomputed so far
  bool possible = true;
  std::function<void(ValueId)> ensure = [&](ValueId v) {
    if (kept[v] || ready[v] || sub.is_graph_input(v) || sub.producer(v).value() >= bm.loss) return;
    const NodeId p = sub.producer(v);
    if (!sub.node(p).recomputable) {
      possible = false;
      return;
    }
    for (ValueId in : sub.node(p).inputs) ensure(in);
    seq.push_back(p);
    for (ValueId out : sub.node(p).outputs) ready[out] = 1;
  };
  for (int32_t i = bm.loss + 1; i < sub.num_nodes(); ++i) {
    for (ValueId v : sub.node(NodeId{i}).inputs) ensure(v);
    seq.push_back(NodeId{i});
  }
  return possible ? seq : Sequence{};
}

// Options between keep-all and keep-nothing, found greedily: starting from keep-all, drop for the
// backward the forward value that frees the most bytes at the loss per unit of recomputation (with
// the values it needs that nothing keeps), and again from there, each step a plan. Cheap stand-ins
// for the MILP where CBC finds nothing in a grid point's time (a GPT attention block: recomputing
// its dropout masks and layer norm frees much at the loss for little cost), and its warm
// starts. The simulator measures every plan.
std::vector<Found> greedy_drop_plans(const BlockModel& bm, Limits& limits) {
  const Graph& sub = *bm.graph;
  const auto values = static_cast<size_t>(sub.num_values());
  IdVector<ValueId, uint8_t> forward_value(values, 0), read_later(values, 0);
  for (int32_t i = 0; i < bm.loss; ++i)
    for (ValueId v : sub.node(NodeId{i}).outputs) forward_value[v] = !sub.value(v).is_output;
  for (int32_t i = bm.loss + 1; i < sub.num_nodes(); ++i)
    for (ValueId v : sub.node(NodeId{i}).inputs) read_later[v] = forward_value[v];
  // The values the loss reads (what the block hands on) stay: they are its output.
  for (ValueId v : sub.node(NodeId{bm.loss}).inputs) read_later[v] = 0;
  std::vector<ValueId> candidates;
  for (int32_t i = 0; i < sub.num_values(); ++i) {
    const ValueId v{i};
    if (read_later[v] && sub.value(v).size_bytes > 0 && sub.node(sub.producer(v)).recomputable)
      candidates.push_back(v);
  }
  IdVector<ValueId, uint8_t> kept(values, 0);
  for (int32_t i = 0; i < sub.num_values(); ++i)
    kept[ValueId{i}] = read_later[ValueId{i}] || !forward_value[ValueId{i}];
  for (ValueId v : sub.node(NodeId{bm.loss}).inputs) kept[v] = 1;
  std::vector<Found> plans;
  Found current = measure(sub, bm, keep_only(sub, bm, kept));
  for (size_t step = 0; step < candidates.size() && !limits.stop(); ++step) {
    std::optional<Found> best;
    size_t best_index = 0;
    double best_ratio = -1;
    for (size_t c = 0; c < candidates.size(); ++c) {
      const ValueId id = candidates[c];
      if (!kept[id]) continue;
      kept[id] = 0;
      Sequence seq = keep_only(sub, bm, kept);
      kept[id] = 1;
      if (seq.empty()) continue;
      limits.spend(2 * static_cast<double>(seq.size()) / kSimulatedStepsPerUnit);
      Found f = measure(sub, bm, std::move(seq));
      if (!f.valid) continue;
      const double freed = static_cast<double>(current.at_loss - f.at_loss);
      if (freed <= 0) continue;
      const double ratio = freed / std::max(f.cost - current.cost, 1e-9);
      if (ratio > best_ratio) best_ratio = ratio, best_index = c, best = std::move(f);
    }
    if (!best) break;
    kept[candidates[best_index]] = 0;
    current = *best;
    plans.push_back(std::move(*best));
  }
  return plans;
}

// The memory-after-step column of step k in stage t (checkmate's memory_rows: stage, step order).
int32_t u_column(const checkmate::StageModel& sm, int32_t t, int32_t k) {
  return sm
      .memory_rows[static_cast<size_t>(t) * static_cast<size_t>(t + 1) / 2 + static_cast<size_t>(k)]
      .u;
}

// The repair of keep-all that seeds each M_peak row simulates one plan per candidate drop, each in
// time about quadratic in the block's nodes. Its work limit is counted in drops x nodes^2, so that
// it stops at the same point on any machine (build/bench/work_unit_bench prints what work costs).
int64_t repair_evaluations(int32_t nodes) {
  constexpr double kRepairWork = 1e7;  // simulated drops x nodes^2
  const double n = std::max(1, nodes);
  return std::max<int64_t>(1, static_cast<int64_t>(kRepairWork / (n * n)));
}

// The set-up of one MILP (Clp's presolve, the model's copies and scaling), which no simplex
// iteration counts, in work units: this many per entry of its model (rows + columns + nonzeros).
// On the large blocks of generated joint graphs of thousands of nodes the presolve takes most of
// the MILPs' time, where their iterations count a small part of it; bench/scale_bench.py prints
// the CPU seconds of a plan at its work limit.
constexpr double kMilpSetupUnitsPerEntry = 8e-7;

double milp_setup_units(const milp::MilpModel& model) {
  return kMilpSetupUnitsPerEntry *
         static_cast<double>(model.num_rows() + model.num_columns() + model.num_nonzeros());
}
#endif

}  // namespace

// The grid's ends. M_peak: P points evenly spaced above the block's memory lower bound (which a
// fixed-order plan seldom reaches) up to the larger of keep-all's and keep-nothing's peaks, so the
// top row has both as warm starts. M_save (set in bm.save_low): from what keep-nothing holds at
// the loss (the values no recomputation can rebuild; the least a plan can hold there) up to M_peak.
std::vector<int64_t> peak_grid(BlockModel& bm, int32_t points) {
  const Graph& sub = *bm.graph;
  int64_t hi = baseline(sub).peak_bytes;
  bm.save_low = bm.loss_floor;
  if (Sequence nothing = keep_nothing_sequence(sub, bm); simulate(sub, nothing).valid) {
    const Found f = measure(sub, bm, std::move(nothing));
    hi = std::max(hi, f.peak);
    bm.save_low = std::max(bm.loss_floor, f.at_loss);
  }
  const int64_t lo = std::min(memory_lower_bound(sub), hi);
  std::vector<int64_t> grid;
  for (int32_t i = 1; i <= points; ++i) grid.push_back(lo + (hi - lo) * i / points);
  return grid;
}

#ifdef REMAT_HAVE_CBC
// The grid of one class, M_peak descending and, within each, M_save descending ([R] §4.2). A plan
// the MILP found for a looser point that fits a tighter one is optimal there too (within the gap):
// it is reused without a solve. Otherwise the MILP runs, warm-started from the cheapest known plan
// that fits the point: a MILP plan, keep-all, keep-nothing, or checkmate's fixed-order repair of
// keep-all at M_peak. When that start runs every node once it is optimal: no MILP. When the MILP
// finds nothing within its work limit, its start (which fits the point) is the point's option. A
// point tighter in both budgets than one where neither the MILP nor a start gave a plan is skipped.
ClassResult solve_class(const BlockModel& bm, const std::vector<int64_t>& grid, int32_t save_points,
                        const OptionParams& params, Limits& limits, uint64_t seed) {
  ClassResult out;
  const Graph& sub = *bm.graph;
  std::vector<Found> found;  // MILP plans
  std::vector<Found> seeds;  // warm starts only
  seeds.push_back(measure(sub, bm, default_schedule(sub)));
  if (Sequence nothing = keep_nothing_sequence(sub, bm); simulate(sub, nothing).valid)
    seeds.push_back(measure(sub, bm, std::move(nothing)));
  // Greedy plans are options in their own right (add_options drops the dominated ones), and
  // warm starts for the MILPs.
  for (Found& f : greedy_drop_plans(bm, limits)) {
    out.plans.push_back(f.plan);
    ++out.greedy;
    seeds.push_back(std::move(f));
  }
  const std::optional<checkmate::Retention> all =
      checkmate::retention_from_sequence(sub, default_schedule(sub));
  auto cheapest_fit = [&](int64_t m_peak, int64_t m_save) {
    const Found* best = nullptr;
    for (const auto* list : {&found, &seeds})
      for (const Found& f : *list)
        if (f.peak <= m_peak && f.at_loss <= m_save && (!best || f.cost < best->cost)) best = &f;
    return best;
  };
  double least_cost = 0;  // every node once: no plan is cheaper
  for (int32_t i = 0; i < sub.num_nodes(); ++i) least_cost += sub.node(NodeId{i}).cost;
  int64_t inputs = 0;
  for (ValueId v : sub.graph_inputs()) inputs += sub.value(v).size_bytes;
  out.too_large = checkmate::estimate_model_size(sub).columns > params.milp_max_columns;
  // The largest M_save at which the MILP found nothing (infeasible, or nothing in time): points
  // below it, which are tighter in both budgets, are not solved.
  int64_t failed_save = -1;
  for (size_t p = grid.size(); p-- > 0 && !limits.stop();) {
    const int64_t m_peak = grid[p];
    if (!cheapest_fit(m_peak, m_peak) && all) {
      // Its own wall-clock backstop, as a MILP's; its work from the class's.
      Limits repair(limits.left(),
                    std::min(params.milp_time_limit_s, std::max(limits.seconds_left(), 1e-3)));
      const checkmate::Retention repaired = checkmate::repair_retention(
          sub, *all, m_peak, repair, nullptr, repair_evaluations(sub.num_nodes()));
      limits.spend(repair.spent());
      out.wall_clock_stops += repair.expired() ? 1 : 0;
      if (repair.out_of_work()) limits.note_work_limit();
      seeds.push_back(measure(sub, bm, checkmate::sequence_from_retention(sub, repaired)));
    }
    for (int32_t j = save_points - 1; j >= 0 && !limits.stop(); --j) {
      const int64_t m_save =
          save_points == 1 ? m_peak : bm.save_low + (m_peak - bm.save_low) * j / (save_points - 1);
      if (m_save <= failed_save) break;
      bool reused = false;
      for (const Found& f : found) reused |= f.peak <= m_peak && f.at_loss <= m_save;
      const Found* start = cheapest_fit(m_peak, m_save);
      if (!reused && start && start->cost <= least_cost) {
        found.push_back(*start);  // optimal here (and at every point it fits): no MILP
        reused = true;
      }
      if (reused) {
        ++out.reused;
        continue;
      }
      Sequence plan;
      if (!out.too_large) {
        checkmate::StageModel sm = checkmate::build_stage_model(sub, m_peak);
        const int32_t u = u_column(sm, bm.loss, bm.loss);
        const double cap = static_cast<double>((m_save - inputs) / sm.size_scale);
        const std::vector<milp::Term> save_row = {{u, 1}};
        sm.model.add_row(-milp::kInf, cap, save_row);
        milp::MilpOptions mo;
        mo.time_limit_s = std::min(params.milp_time_limit_s, std::max(limits.seconds_left(), 1e-3));
        // The class's work left ends the grid once it runs out.
        const int64_t affordable = milp::iterations_for(limits.left(), sm.model);
        mo.iteration_limit = std::min(params.milp_iterations, affordable);
        mo.seed = seed;
        mo.relative_gap = params.milp_gap;
        if (start) {
          std::optional<std::vector<double>> x = sm.encode(start->plan);
          if (x && sm.model.max_violation(*x) < 1e-6) mo.start = std::move(*x);
        }
        const double setup = milp_setup_units(sm.model);
        if (setup < limits.left()) {
          const milp::MilpResult r = milp::solve_milp(sm.model, mo);
          limits.spend(setup +
                       static_cast<double>(r.iterations) * milp::units_per_iteration(sm.model));
          if (r.stopped_on_iterations && affordable < params.milp_iterations)
            limits.note_work_limit();
          out.wall_clock_stops += r.stopped_on_time ? 1 : 0;
          out.work_limit_stops += r.stopped_on_iterations ? 1 : 0;
          ++out.runs;
          if (!r.x.empty()) plan = checkmate::sequence_from_retention(sub, sm.retention(r.x));
        } else {
          limits.note_work_limit();  // the class's work left does not buy the set-up
        }
      }
      if (plan.empty() || !simulate(sub, plan).valid) {
        if (start) {  // nothing better in time: the start fits this point
          const Found kept = *start;
          ++out.from_start;
          out.plans.push_back(kept.plan);
          found.push_back(kept);
          continue;
        }
        failed_save = std::max(failed_save, m_save);  // tighter budgets fare no better
        break;
      }
      ++out.feasible;
      out.plans.push_back(plan);
      found.push_back(measure(sub, bm, std::move(plan)));
    }
  }
  out.cut_short = limits.stop();
  out.work = limits.spent();
  return out;
}
#else
// Built without CBC: class_options never gets here (milp_available() is false).
ClassResult solve_class(const BlockModel&, const std::vector<int64_t>&, int32_t,
                        const OptionParams&, Limits&, uint64_t) {
  return {};
}
#endif

}  // namespace remat::rockmate
