// rk-Checkmate options per class of identical blocks (options.h).
// The block becomes a small graph: its nodes (less pure views, replayed at lowering), a loss
// placeholder between forward and backward that reads what the block hands on (a^ℓ) and produces
// the gradients later blocks send back, the values of other blocks and the weights as resident
// inputs, and what the backward hands on as outputs. The MILP is checkmate's value-level model on
// it with one more row: memory at the loss step <= M_save. Each solution, split at the loss, is an
// option (positions in Block::nodes).
#include "options.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#ifdef REMAT_HAVE_CBC
#include "checkmate_model/formulation.h"
#include "milp/milp.h"
#endif
#include "remat/error.h"
#include "remat/simulate.h"

namespace remat::rockmate {
namespace {

LocalOption keep_all(const Block& b) {
  LocalOption o;
  for (int32_t i = 0; i < static_cast<int32_t>(b.nodes.size()); ++i)
    (i < b.num_forward ? o.forward : o.backward).push_back(i);
  return o;
}

// The forward again (recomputable nodes) right before the backward: nothing kept but a^ℓ.
LocalOption keep_nothing(const Graph& g, const Block& b) {
  LocalOption o;
  for (int32_t i = 0; i < b.num_forward; ++i) {
    o.forward.push_back(i);
    if (g.node(b.nodes[static_cast<size_t>(i)]).recomputable) o.backward.push_back(i);
  }
  for (int32_t i = b.num_forward; i < static_cast<int32_t>(b.nodes.size()); ++i)
    o.backward.push_back(i);
  return o;
}

// The block as a graph for the MILP, and the way back to block positions.
struct BlockModel {
  std::optional<Graph> graph;
  std::vector<int32_t> position;  // sub-graph node -> position in Block::nodes (-1: the loss)
  int32_t loss = 0;               // sub-graph node index of the loss placeholder
  std::vector<int32_t> dropped;   // block positions of the views left out (replayed at lowering)
  int64_t loss_floor = 0;         // least memory at the loss: inputs, what it reads and produces
  int64_t save_low = 0;           // lowest M_save of the grid (set with the grid)
};

// A pure view: weighs nothing, costs nothing, stays inside the block.
bool is_view(const Graph& g, const Block& b, NodeId n) {
  const Node& node = g.node(n);
  if (!node.recomputable || node.cost != 0 || node.temp_bytes != 0 || node.outputs.empty())
    return false;
  for (ValueId v : node.outputs) {
    if (g.value(v).size_bytes != 0 || g.value(v).is_output) return false;
    if (std::find(b.outputs.begin(), b.outputs.end(), v) != b.outputs.end()) return false;
  }
  return true;
}

BlockModel block_model(const Graph& g, const Block& b, int32_t stage_of_loss_gradients) {
  (void)stage_of_loss_gradients;
  BlockModel bm;
  GraphSpec spec;
  spec.name = fmt::format("block {}", b.stage);
  std::map<int32_t, ValueId> local;  // graph value -> sub-graph value
  std::vector<uint8_t> in_block(static_cast<size_t>(g.num_nodes()), 0);
  for (NodeId n : b.nodes) in_block[static_cast<size_t>(n.value())] = 1;
  std::vector<uint8_t> view(b.nodes.size(), 0);
  for (size_t i = 0; i < b.nodes.size(); ++i)
    if (is_view(g, b, b.nodes[i])) view[i] = 1, bm.dropped.push_back(static_cast<int32_t>(i));
  auto value_of = [&](ValueId v) {
    auto it = local.find(v.value());
    if (it != local.end()) return it->second;
    const ValueId id{static_cast<int32_t>(spec.values.size())};
    spec.values.push_back({.name = g.value(v).name, .size_bytes = g.value(v).size_bytes});
    local.emplace(v.value(), id);
    return id;
  };
  auto produced_here = [&](ValueId v) {
    return !g.is_graph_input(v) && in_block[static_cast<size_t>(g.producer(v).value())];
  };
  // By the block's parts, not phases: a backward helper (lower.h) is a forward node in the
  // backward part.
  std::vector<uint8_t> in_forward_part(static_cast<size_t>(g.num_nodes()), 0);
  for (int32_t i = 0; i < b.num_forward; ++i)
    in_forward_part[static_cast<size_t>(b.nodes[static_cast<size_t>(i)].value())] = 1;
  auto made_in_forward_part = [&](ValueId v) {
    return produced_here(v) && in_forward_part[static_cast<size_t>(g.producer(v).value())];
  };
  auto from_dropped = [&](ValueId v) {
    if (!produced_here(v)) return false;
    const auto it = std::find(b.nodes.begin(), b.nodes.end(), g.producer(v));
    return view[static_cast<size_t>(it - b.nodes.begin())] != 0;
  };
  auto add_node = [&](size_t i) {
    const Node& n = g.node(b.nodes[i]);
    Node copy{.name = n.name,
              .cost = n.cost,
              .op = n.op,
              .kind = n.kind,
              .phase = n.phase,
              .temp_bytes = n.temp_bytes,
              .recomputable = n.recomputable};
    for (ValueId v : n.inputs)
      if (!from_dropped(v)) copy.inputs.push_back(value_of(v));
    for (ValueId v : n.outputs) copy.outputs.push_back(value_of(v));
    spec.nodes.push_back(std::move(copy));
    bm.position.push_back(static_cast<int32_t>(i));
  };
  // Gradients from the blocks above: produced outside by backward nodes, read here.
  std::vector<ValueId> incoming;
  for (size_t i = static_cast<size_t>(b.num_forward); i < b.nodes.size(); ++i)
    for (ValueId v : g.node(b.nodes[i]).inputs)
      if (!g.is_graph_input(v) && !produced_here(v) &&
          g.node(g.producer(v)).phase == Phase::kBackward &&
          std::find(incoming.begin(), incoming.end(), v) == incoming.end())
        incoming.push_back(v);
  // Resident inputs first (values of blocks below and weights), so the loss's outputs are not.
  for (NodeId n : b.nodes)
    for (ValueId v : g.node(n).inputs)
      if (!produced_here(v) && std::find(incoming.begin(), incoming.end(), v) == incoming.end())
        value_of(v);
  for (size_t i = 0; i < static_cast<size_t>(b.num_forward); ++i)
    if (!view[i]) add_node(i);
  Node loss{.name = "loss placeholder",
            .cost = 0,
            .op = "rockmate.loss",
            .kind = OpKind::kOther,
            .phase = Phase::kForward,
            .temp_bytes = 0,
            .recomputable = false};
  for (ValueId v : b.outputs)
    if (made_in_forward_part(v) && g.value(v).size_bytes > 0 && !g.value(v).is_output)
      loss.inputs.push_back(value_of(v));
  for (ValueId v : incoming) loss.outputs.push_back(value_of(v));
  const ValueId token{static_cast<int32_t>(spec.values.size())};
  spec.values.push_back({.name = "loss token", .size_bytes = 0});
  loss.outputs.push_back(token);
  bm.loss = static_cast<int32_t>(spec.nodes.size());
  spec.nodes.push_back(std::move(loss));
  bm.position.push_back(-1);
  for (size_t i = static_cast<size_t>(b.num_forward); i < b.nodes.size(); ++i)
    if (!view[i]) add_node(i);
  // What the block hands on (and graph outputs) stays to the end.
  for (NodeId n : b.nodes)
    for (ValueId v : g.node(n).outputs) {
      const bool hands_on = g.value(v).is_output ||
                            (!in_forward_part[static_cast<size_t>(n.value())] &&
                             std::find(b.outputs.begin(), b.outputs.end(), v) != b.outputs.end());
      if (hands_on && local.count(v.value()))
        spec.values[static_cast<size_t>(local[v.value()].value())].is_output = true;
    }
  bm.graph = Graph::build(std::move(spec), "rockmate block");
  const Graph& sub = *bm.graph;
  for (ValueId v : sub.graph_inputs()) bm.loss_floor += sub.value(v).size_bytes;
  for (ValueId v : sub.node(NodeId{bm.loss}).inputs) bm.loss_floor += sub.value(v).size_bytes;
  for (ValueId v : sub.node(NodeId{bm.loss}).outputs) bm.loss_floor += sub.value(v).size_bytes;
  return bm;
}

// A sub-graph sequence as an option: split at the loss, mapped to block positions, with the views
// left out replayed right before a use whenever what they view was produced since they last ran.
LocalOption to_option(const Graph& g, const Block& b, const BlockModel& bm, const Sequence& seq) {
  LocalOption o;
  std::vector<int64_t> produced_at(static_cast<size_t>(g.num_values()), -1);
  std::vector<int64_t> ran_at(b.nodes.size(), -1);
  std::map<int32_t, int32_t> position_of;  // graph node -> block position
  for (size_t i = 0; i < b.nodes.size(); ++i)
    position_of[b.nodes[i].value()] = static_cast<int32_t>(i);
  std::vector<uint8_t> dropped(b.nodes.size(), 0);
  for (int32_t i : bm.dropped) dropped[static_cast<size_t>(i)] = 1;
  int64_t clock = 0;
  bool after_loss = false;
  auto emit = [&](int32_t pos) {
    (after_loss ? o.backward : o.forward).push_back(pos);
    ran_at[static_cast<size_t>(pos)] = clock;
    for (ValueId v : g.node(b.nodes[static_cast<size_t>(pos)]).outputs)
      produced_at[static_cast<size_t>(v.value())] = clock;
    ++clock;
  };
  std::function<void(int32_t)> ready = [&](int32_t pos) {
    for (ValueId v : g.node(b.nodes[static_cast<size_t>(pos)]).inputs) {
      if (g.is_graph_input(v)) continue;
      const auto it = position_of.find(g.producer(v).value());
      if (it == position_of.end() || !dropped[static_cast<size_t>(it->second)]) continue;
      const int32_t d = it->second;
      bool stale = ran_at[static_cast<size_t>(d)] < 0;
      for (ValueId w : g.node(b.nodes[static_cast<size_t>(d)]).inputs)
        stale |= produced_at[static_cast<size_t>(w.value())] > ran_at[static_cast<size_t>(d)];
      if (!stale) continue;
      ready(d);
      emit(d);
    }
  };
  for (NodeId n : seq) {
    const int32_t pos = bm.position[static_cast<size_t>(n.value())];
    if (pos < 0) {
      after_loss = true;
      continue;
    }
    ready(pos);
    emit(pos);
  }
  // Views whose outputs nothing in the block reads still run once, in the forward (graph order).
  for (int32_t d : bm.dropped)
    if (ran_at[static_cast<size_t>(d)] < 0) {
      REMAT_CHECK(d < b.num_forward || after_loss, "rockmate: a backward view before the loss");
      auto& run = d < b.num_forward ? o.forward : o.backward;
      run.push_back(d);  // appended: reads nothing anyone else produces later
    }
  return o;
}

struct ClassResult {
  std::vector<Sequence> plans;  // sub-graph sequences found, in grid order
  int64_t runs = 0, feasible = 0, reused = 0;
  int64_t from_start = 0;        // points whose MILP found nothing: their warm start kept
  int64_t greedy = 0;            // plans of greedy_drop_plans
  bool too_large = false;        // past milp_max_columns: no MILP ran, the starts are the options
  int64_t wall_clock_stops = 0;  // MILPs and repairs the wall clock ended (see OptionStats)
  int64_t work_limit_stops = 0;  // MILPs that milp_iterations ended
  bool cut_short = false;        // the class's share of the work or the clock ended the grid
  double work = 0;               // work units spent
};

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
Sequence keep_only(const Graph& sub, const BlockModel& bm, const std::vector<uint8_t>& kept) {
  Sequence seq;
  for (int32_t i = 0; i <= bm.loss; ++i) seq.push_back(NodeId{i});
  std::vector<uint8_t> ready(kept.size(), 0);  // values recomputed so far
  bool possible = true;
  std::function<void(ValueId)> ensure = [&](ValueId v) {
    const auto i = static_cast<size_t>(v.value());
    if (kept[i] || ready[i] || sub.is_graph_input(v) || sub.producer(v).value() >= bm.loss) return;
    const NodeId p = sub.producer(v);
    if (!sub.node(p).recomputable) {
      possible = false;
      return;
    }
    for (ValueId in : sub.node(p).inputs) ensure(in);
    seq.push_back(p);
    for (ValueId out : sub.node(p).outputs) ready[static_cast<size_t>(out.value())] = 1;
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
// its dropout masks and layer norm frees 0.8 MB at the loss for 0.3 % of its cost), and its warm
// starts. The simulator measures every plan.
std::vector<Found> greedy_drop_plans(const BlockModel& bm, Limits& limits) {
  const Graph& sub = *bm.graph;
  const auto values = static_cast<size_t>(sub.num_values());
  std::vector<uint8_t> forward_value(values, 0), read_later(values, 0);
  for (int32_t i = 0; i < bm.loss; ++i)
    for (ValueId v : sub.node(NodeId{i}).outputs)
      forward_value[static_cast<size_t>(v.value())] = !sub.value(v).is_output;
  for (int32_t i = bm.loss + 1; i < sub.num_nodes(); ++i)
    for (ValueId v : sub.node(NodeId{i}).inputs)
      read_later[static_cast<size_t>(v.value())] = forward_value[static_cast<size_t>(v.value())];
  // The values the loss reads (what the block hands on) stay: they are its output.
  for (ValueId v : sub.node(NodeId{bm.loss}).inputs) read_later[static_cast<size_t>(v.value())] = 0;
  std::vector<ValueId> candidates;
  for (size_t i = 0; i < values; ++i)
    if (read_later[i] && sub.value(ValueId{static_cast<int32_t>(i)}).size_bytes > 0 &&
        sub.node(sub.producer(ValueId{static_cast<int32_t>(i)})).recomputable)
      candidates.push_back(ValueId{static_cast<int32_t>(i)});
  std::vector<uint8_t> kept(values, 0);
  for (size_t i = 0; i < values; ++i) kept[i] = read_later[i] || !forward_value[i];
  for (ValueId v : sub.node(NodeId{bm.loss}).inputs) kept[static_cast<size_t>(v.value())] = 1;
  std::vector<Found> plans;
  Found current = measure(sub, bm, keep_only(sub, bm, kept));
  for (size_t step = 0; step < candidates.size() && !limits.stop(); ++step) {
    std::optional<Found> best;
    size_t best_index = 0;
    double best_ratio = -1;
    for (size_t c = 0; c < candidates.size(); ++c) {
      const auto id = static_cast<size_t>(candidates[c].value());
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
    kept[static_cast<size_t>(candidates[best_index].value())] = 0;
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
// time about quadratic in the block's nodes (measured on DenseNet-121's blocks of 140, 309 and 759
// nodes: 2.4-2.9 ns per drop and node squared). Its work limit is about 25 ms of that, the wall
// clock limit it had before, counted in drops so that it stops at the same point on any machine.
int64_t repair_evaluations(int32_t nodes) {
  constexpr double kRepairWork = 1e7;  // simulated drops x nodes^2
  const double n = std::max(1, nodes);
  return std::max<int64_t>(1, static_cast<int64_t>(kRepairWork / (n * n)));
}

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
        mo.threads = 1;
        mo.seed = seed;
        mo.relative_gap = params.milp_gap;
        if (start) {
          std::optional<std::vector<double>> x = sm.encode(start->plan);
          if (x && sm.model.max_violation(*x) < 1e-6) mo.start = std::move(*x);
        }
        const milp::MilpResult r = milp::solve_milp(sm.model, mo);
        limits.spend(static_cast<double>(r.iterations) * milp::units_per_iteration(sm.model));
        if (r.stopped_on_iterations && affordable < params.milp_iterations)
          limits.note_work_limit();
        out.wall_clock_stops += r.stopped_on_time ? 1 : 0;
        out.work_limit_stops += r.stopped_on_iterations ? 1 : 0;
        ++out.runs;
        if (!r.x.empty()) plan = checkmate::sequence_from_retention(sub, sm.retention(r.x));
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

std::string cache_key(uint64_t hash, const std::string& form, const OptionParams& p) {
  // "-4": since MILPs and repairs stop on work limits ("-3": options also from
  // greedy_drop_plans; "-2": from the starts where a MILP finds nothing).
  return fmt::format("{:016x}-{:016x}-{}x{}-{}-{}-{}-{}-4", hash, std::hash<std::string>{}(form),
                     p.peak_points, p.save_points, p.milp_iterations, p.milp_time_limit_s,
                     p.milp_gap, p.milp_max_columns);
}

// Entries of the caller's SolveCache are the option lists by cache_key, under this prefix.
std::string memory_key(const std::string& key) { return "rockmate/" + key; }

std::filesystem::path cache_file(const OptionParams& p, const std::string& key) {
  return std::filesystem::path(p.cache_dir) / fmt::format("rockmate-{}.json", key);
}

std::optional<std::vector<LocalOption>> read_disk(const OptionParams& p, const std::string& key,
                                                  size_t positions) {
  if (p.cache_dir.empty()) return std::nullopt;
  std::ifstream in(cache_file(p, key));
  if (!in) return std::nullopt;
  try {
    const nlohmann::json doc = nlohmann::json::parse(in);
    if (doc.at("key").get<std::string>() != key) return std::nullopt;
    std::vector<LocalOption> out;
    for (const auto& o : doc.at("options")) {
      LocalOption lo{o.at("forward").get<std::vector<int32_t>>(),
                     o.at("backward").get<std::vector<int32_t>>()};
      for (const auto* run : {&lo.forward, &lo.backward})
        for (int32_t i : *run)
          if (i < 0 || static_cast<size_t>(i) >= positions) return std::nullopt;
      out.push_back(std::move(lo));
    }
    return out;
  } catch (const std::exception&) {
    return std::nullopt;  // a damaged cache entry is recomputed (and rewritten)
  }
}

void write_disk(const OptionParams& p, const std::string& key,
                const std::vector<LocalOption>& options) {
  if (p.cache_dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(p.cache_dir, ec);
  if (ec)
    throw InputError(fmt::format("rockmate: cannot create the cache directory '{}': {}",
                                 p.cache_dir, ec.message()));
  nlohmann::json doc = {{"format", "remat-rockmate-options"}, {"version", 1}, {"key", key}};
  nlohmann::json list = nlohmann::json::array();
  for (const LocalOption& o : options)
    list.push_back({{"forward", o.forward}, {"backward", o.backward}});
  doc["options"] = std::move(list);
  const std::filesystem::path path = cache_file(p, key);
  const std::filesystem::path temp = path.string() + ".tmp";
  {
    std::ofstream out(temp);
    out << doc.dump() << '\n';
    if (!out) throw InputError(fmt::format("rockmate: cannot write '{}'", temp.string()));
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) throw InputError(fmt::format("rockmate: cannot write '{}'", path.string()));
}

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

}  // namespace

bool milp_available() {
#ifdef REMAT_HAVE_CBC
  return true;
#else
  return false;
#endif
}

std::vector<std::vector<LocalOption>> class_options(const Graph& graph, const BlockStructure& bs,
                                                    const OptionParams& params,
                                                    const Limits& limits, SolveCache* cache,
                                                    OptionStats& stats) {
  const size_t classes = bs.classes.size();
  std::vector<std::vector<LocalOption>> out(classes);
  stats.runs_per_class.assign(classes, 0);
  struct Work {
    size_t cls;
    std::string key;
    BlockModel model;
    std::vector<int64_t> grid;
    ClassResult result;
  };
  std::vector<Work> work;
  for (size_t c = 0; c < classes; ++c) {
    const Block& rep = bs.blocks[static_cast<size_t>(bs.classes[c].members.front())];
    out[c] = {keep_all(rep), keep_nothing(graph, rep)};
    // The loss stage has no forward output to hand on: keep-all and keep-nothing only.
    if (!params.milp || !milp_available() || rep.stage == static_cast<int32_t>(bs.blocks.size()))
      continue;
    const std::string key =
        cache_key(bs.classes[c].canonical_hash, canonical_form(graph, rep), params);
    if (cache != nullptr)
      if (const auto kept = cache->find<std::vector<LocalOption>>(memory_key(key))) {
        out[c] = *kept;
        ++stats.memory_hits;
        continue;
      }
    if (auto disk = read_disk(params, key, rep.nodes.size())) {
      out[c] = *disk;
      ++stats.disk_hits;
      if (cache != nullptr) cache->store(memory_key(key), *disk);
      continue;
    }
    Work w{c, key, block_model(graph, rep, rep.stage), {}, {}};
    w.grid = peak_grid(w.model, params.peak_points);
    work.push_back(std::move(w));
  }
  // Independent classes on `threads` workers, each with an even share of the work (so a class's
  // options do not depend on the order the workers took them); results land in fixed slots. An
  // exception leaving a worker thread would end the process: each is kept and the first rethrown
  // after the join.
  const double class_work = limits.left() / static_cast<double>(std::max<size_t>(work.size(), 1));
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(work.size());
  auto worker = [&] {
    for (size_t t; (t = next.fetch_add(1)) < work.size();) {
      Limits class_limits(class_work, limits.deadline());
      if (class_limits.stop()) {
        work[t].result.cut_short = true;
        continue;
      }
      try {
        work[t].result = solve_class(work[t].model, work[t].grid, params.save_points, params,
                                     class_limits, 1 + t);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    }
  };
  const int threads =
      std::clamp<int>(params.threads, 1, static_cast<int>(std::max<size_t>(work.size(), 1)));
  if (threads == 1) {
    worker();
  } else {
    std::vector<std::jthread> pool;
    for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  for (Work& w : work) {
    const Block& rep = bs.blocks[static_cast<size_t>(bs.classes[w.cls].members.front())];
    std::vector<LocalOption>& list = out[w.cls];
    stats.runs_per_class[w.cls] += w.result.runs;
    stats.milp_runs += w.result.runs;
    stats.milp_feasible += w.result.feasible;
    stats.milp_reused += w.result.reused;
    stats.options_from_start += w.result.from_start;
    stats.options_greedy += w.result.greedy;
    stats.classes_too_large += w.result.too_large ? 1 : 0;
    stats.wall_clock_stops += w.result.wall_clock_stops;
    stats.work_limit_stops += w.result.work_limit_stops;
    stats.work += w.result.work;
    for (const Sequence& plan : w.result.plans) {
      LocalOption o = to_option(graph, rep, w.model, plan);
      if (std::find(list.begin(), list.end(), o) == list.end()) list.push_back(std::move(o));
    }
    if (w.result.cut_short) {
      // Only complete grids are kept: a grid the limits cut short depends on them.
      (limits.deadline().expired() ? stats.timed_out : stats.grid_work_limit) = true;
      continue;
    }
    if (cache != nullptr) cache->store(memory_key(w.key), list);
    write_disk(params, w.key, list);
  }
  return out;
}

}  // namespace remat::rockmate
