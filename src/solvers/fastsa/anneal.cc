#include "anneal.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include "state.h"

namespace remat::fastsa {
namespace {

// The best state seen, as a copy of the slot vector that lags behind the live state: accepted
// mutations are logged as (slot, unit) writes and replayed onto the copy when the live state
// becomes the new best. When the log outgrows the slot count it is compacted to the difference
// between the two vectors, so memory stays O(slots) and time O(1) amortised per move.
class BestKeeper {
 public:
  explicit BestKeeper(const SaState& state) : best_slots_(static_cast<size_t>(state.num_slots())) {
    for (int32_t t = 0; t < state.num_slots(); ++t)
      best_slots_[static_cast<size_t>(t)] = state.unit_at(t);
    log_.reserve(1024);
  }
  void record(int32_t t, int32_t unit) { log_.emplace_back(t, unit); }
  void commit() {
    for (auto [t, unit] : log_) best_slots_[static_cast<size_t>(t)] = unit;
    log_.clear();
  }
  void compact_if_long(const SaState& state) {
    if (log_.size() < best_slots_.size()) return;
    log_.clear();
    for (int32_t t = 0; t < state.num_slots(); ++t)
      if (state.unit_at(t) != best_slots_[static_cast<size_t>(t)])
        log_.emplace_back(t, state.unit_at(t));
  }
  std::vector<int32_t> order() const {
    std::vector<int32_t> units;
    for (int32_t u : best_slots_)
      if (u != kNop) units.push_back(u);
    return units;
  }

 private:
  std::vector<int32_t> best_slots_;
  std::vector<std::pair<int32_t, int32_t>> log_;
};

int32_t random_nop(const SaState& state, Rng& rng) {
  for (;;) {
    const auto t = static_cast<int32_t>(rng.below(static_cast<uint64_t>(state.num_slots())));
    if (state.is_nop(t)) return t;
  }
}

// A nop strictly inside (lo, hi), or -1 after a few misses.
int32_t nop_in_range(const SaState& state, std::pair<int32_t, int32_t> range, Rng& rng) {
  const auto [lo, hi] = range;
  if (hi - lo < 2) return -1;
  for (int tries = 0; tries < 8; ++tries) {
    const auto t = static_cast<int32_t>(
        lo + 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(hi - lo - 1))));
    if (state.is_nop(t)) return t;
  }
  return -1;
}

enum class Move { kAdd, kRemove, kRotate };

// When the convergence window fires while the schedule is still hot, the stage cools to its final
// temperature over this many more windows before it may stop (see Annealer::run): a stage stopped
// hot leaves recomputation a cooler walk removes, and more windows than this bought little more
// for their time (bench/fastsa_bench.cc measures the schedules).
constexpr double kQuenchWindows = 3;

// fits_exactly checks the expansion again only once the state's peak has fallen by this share of
// its last checked peak's distance to the budget: the state's peak bounds the expansion's from
// above by little, so far above the budget a check at every new lowest peak (thousands on random
// layered graphs of 10,000 nodes at 50 %, a good part of stage 1's time) cannot fit, and near
// the budget the checks come as often as before.
constexpr int64_t kExactCheckGapShare = 64;

// peak_proposal draws the reader within this many units' spacing of slots after the peak.
constexpr int64_t kPeakWindowUnits = 8;

// One proposed mutation, enough to apply, log and undo it.
struct Proposal {
  Move move = Move::kAdd;
  int32_t unit = kNop;
  int32_t from = -1;  // kRemove, kRotate
  int32_t to = -1;    // kAdd, kRotate
};

class Annealer {
 public:
  Annealer(const UnitTable& units, std::span<const int32_t> start, const StageSettings& settings,
           WalkContext& context)
      : units_(units),
        settings_(settings),
        context_(context),
        state_(units, settings.slots, start, settings.soft_peak_scale),
        best_(state_) {
    for (int32_t u = 0; u < units.num_units(); ++u)
      if (units.recomputable[static_cast<size_t>(u)]) addable_.push_back(u);
    if (settings.peak_moves > 0) {
      producer_.assign(static_cast<size_t>(units.num_values()), kNop);
      for (int32_t u = 0; u < units.num_units(); ++u)
        for (int32_t v : units.outputs(u))
          if (producer_[static_cast<size_t>(v)] == kNop) producer_[static_cast<size_t>(v)] = u;
      const int64_t per_unit = settings.slots / std::max<int32_t>(1, units.num_units());
      peak_window_ = static_cast<int32_t>(std::max<int64_t>(8, kPeakWindowUnits * per_unit));
    }
  }

  StageResult run(std::string_view stage_name) {
    const auto start = std::chrono::steady_clock::now();
    StageResult r;
    double f = objective();
    const double h_initial = settings_.initial_temperature > 0
                                 ? settings_.initial_temperature
                                 : settings_.initial_temperature_fraction * f;
    const double h_final = h_initial * settings_.final_temperature_ratio;
    double decay = settings_.iterations > 0 ? std::exp(std::log(settings_.final_temperature_ratio) /
                                                       static_cast<double>(settings_.iterations))
                                            : 1.0;
    double h = h_initial;
    best_peak_ = state_.peak();
    best_cost_ = state_.cost();
    best_objective_ = f;
    const int64_t sample_every = std::max<int64_t>(1, settings_.iterations / 100);
    double last_progress = 0;
    bool fits = best_peak_ <= context_.budget_bytes;
    bool done = settings_.stop_when_feasible && (fits || fits_exactly());
    done = done || at_least_cost();
    int64_t& it = iteration_;
    const int64_t window = settings_.convergence_window;
    // The work limit cuts the schedule short; it does not shorten it (the temperatures fall as
    // over the whole schedule).
    const double weight = move_weight(settings_.slots) * degree_weight_;
    const int64_t moves_at_start = context_.moves_left;
    const int64_t affordable = std::min(settings_.iterations, affordable_iterations(weight));
    const int64_t cap = settings_.iteration_cap;
    const int64_t last = cap > 0 ? std::min(affordable, cap) : affordable;
    bool simulations_used_the_work = false;
    for (; it < last && !done; ++it) {
      if ((it & 1023) == 0 && it > 0) {
        if (context_.deadline != nullptr && context_.deadline->expired()) {
          r.time_limit_hit = true;
          break;
        }
        // The exact peak checks (fits_exactly) spend the walk's moves too: the stage ends when
        // they and the iterations have spent what it started with.
        if (simulated_moves_ > 0 &&
            weighted_moves(it, weight) + simulated_moves_ >= moves_at_start) {
          simulations_used_the_work = true;
          break;
        }
        // Checked every 1024 iterations, so the stop point is a pure function of the seed.
        // With quench_in_full, not before the quench has cooled fully (quench_end_).
        if (window > 0 && it - last_improvement_ >= window && it >= quench_end_) {
          // Converged while the schedule is still hot (stage 2 gets the iterations stage 1 left,
          // so its nominal schedule may be 20 M iterations long): the best plan is then the best
          // of a hot walk. Cool to the final temperature over kQuenchWindows windows, as the
          // full schedule would end, and stop at the next window without improvement.
          if (!quenched_ && h > 10 * h_final) {
            quenched_ = true;
            decay =
                std::exp(std::log(h_final / h) / (kQuenchWindows * static_cast<double>(window)));
            last_improvement_ = it;
            if (settings_.quench_in_full)
              quench_end_ = it + static_cast<int64_t>(kQuenchWindows * static_cast<double>(window));
          } else {
            r.converged = true;
            break;
          }
        }
        if (it % sample_every < 1024) sample(start, it);
        report_progress(stage_name, it, last_progress);
      }
      h *= decay;
      if (quenched_ && h < h_final) h = h_final;
      Proposal p;
      if (!propose(p)) continue;
      ++r.applied;
      apply(p);
      const double f_new = objective();
      const bool breaks_budget =
          settings_.keep_within_budget && fits && state_.peak() > context_.budget_bytes;
      if (!breaks_budget && (f_new <= f || context_.rng.uniform() < std::exp((f - f_new) / h))) {
        f = f_new;
        ++r.accepted;
        log_accepted(p);
        note_state(f);
        fits = state_.peak() <= context_.budget_bytes;
        done = settings_.stop_when_feasible && (fits || fits_exactly());
        done = done || at_least_cost();
      } else {
        state_.undo_last();
      }
    }
    r.iterations = it;
    const bool ran_out = !done && !r.time_limit_hit && !r.converged && it == last;
    r.work_limit_hit = simulations_used_the_work ||
                       (ran_out && affordable < settings_.iterations && last == affordable);
    r.capped = !simulations_used_the_work && ran_out && last == cap && cap < affordable;
    context_.moves_left -= weighted_moves(it, weight) + simulated_moves_;
    context_.work_limit_hit |= r.work_limit_hit;
    context_.time_limit_hit |= r.time_limit_hit;
    r.at_least_cost = at_least_cost();
    sample(start, it);
    context_.iterations_before += it;
    r.best_order = best_.order();
    r.best_peak = best_peak_;
    r.best_cost = best_cost_;
    r.initial_temperature = h_initial;
    r.final_temperature = h_final;
    r.stop_temperature = h;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  }

 private:
  // The iterations the walk's moves left pay for at `weight` moves each.
  int64_t affordable_iterations(double weight) const {
    const int64_t left = std::max<int64_t>(0, context_.moves_left);
    if (weight == 1) return left;
    const double iterations = static_cast<double>(left) / weight;
    return iterations >= 0x1p62 ? int64_t{1} << 62 : static_cast<int64_t>(iterations);
  }
  static int64_t weighted_moves(int64_t iterations, double weight) {
    return weight == 1 ? iterations
                       : static_cast<int64_t>(std::ceil(static_cast<double>(iterations) * weight));
  }

  double objective() {
    const double peak =
        settings_.soft_peak_scale > 0 ? state_.soft_peak() : static_cast<double>(state_.peak());
    // A rotation leaves the cost as it was: its term (a pow) is computed once per cost.
    const double cost = state_.cost();
    if (cost != term_cost_) {
      term_cost_ = cost;
      cost_term_ = context_.objective.cost_term(cost);
    }
    return context_.objective.memory_term(peak) * cost_term_;
  }

  bool propose(Proposal& p) {
    Rng& rng = context_.rng;
    if (settings_.peak_moves > 0 && rng.uniform() < settings_.peak_moves) return peak_proposal(p);
    p.move = settings_.rotations_only ? Move::kRotate
             : settings_.fixed_order  ? static_cast<Move>(rng.below(2))
                                      : static_cast<Move>(rng.below(3));
    switch (p.move) {
      case Move::kAdd:
        if (addable_.empty()) return false;
        p.unit = addable_[rng.below(addable_.size())];
        p.to = random_nop(state_, rng);
        if (settings_.fixed_order && !state_.after_first_production(p.unit, p.to)) return false;
        return state_.can_add(p.unit, p.to);
      case Move::kRemove:
        p.from = state_.occupied_slot(
            static_cast<int32_t>(rng.below(static_cast<uint64_t>(state_.num_occupied()))));
        p.unit = state_.unit_at(p.from);
        if (settings_.fixed_order && !state_.after_first_production(p.unit, p.from)) return false;
        return state_.can_remove(p.from);
      case Move::kRotate:
        p.from = state_.occupied_slot(
            static_cast<int32_t>(rng.below(static_cast<uint64_t>(state_.num_occupied()))));
        p.unit = state_.unit_at(p.from);
        if (settings_.local_rotations) {
          p.to = nop_in_range(state_, state_.move_range(p.from), rng);
          return p.to >= 0 && state_.can_move(p.from, p.to);
        }
        p.to = random_nop(state_, rng);
        return state_.can_move(p.from, p.to);
    }
    return false;
  }

  // A recomputation drawn around the slot of the peak, where a uniform mutation rarely lands on
  // large graphs (most slots' memory is below the peak, so most mutations cannot lower it). A
  // unit after the peak (within the window) reads a value produced before it; a copy of the
  // value's producer goes to a nop between the peak and that unit, so the value need not be live
  // across the peak where its earlier uses are before it. Among equal peak slots the peak is
  // drawn at random: always the same one would leave the others (a move that lowers one alone
  // does not lower the peak). Removals and moves near the peak were tried as well and led to
  // higher peaks than uniform ones (docs/solvers/fastsa.md).
  bool peak_proposal(Proposal& p) {
    if (settings_.fixed_order || settings_.rotations_only) return false;
    // Accepted whenever they leave the peak as it was, these adds would fill the state on a
    // small graph, and random_nop needs nops: they stop at half the slots.
    if (2 * state_.num_occupied() >= state_.num_slots()) return false;
    Rng& rng = context_.rng;
    const int32_t peak = state_.peak_slot(rng.next());
    const int32_t last = std::min(state_.num_slots() - 1, peak + peak_window_);
    if (peak >= last) return false;
    const auto t = static_cast<int32_t>(peak + 1 + rng.below(static_cast<uint64_t>(last - peak)));
    int32_t reader = t;
    while (reader <= last && state_.is_nop(reader)) ++reader;
    if (reader > last) return false;
    const std::span<const int32_t> inputs = units_.inputs(state_.unit_at(reader));
    if (inputs.empty()) return false;
    const int32_t v = inputs[rng.below(inputs.size())];
    p.move = Move::kAdd;
    p.unit = producer_[static_cast<size_t>(v)];
    if (p.unit == kNop || state_.first_production(v) >= peak) return false;
    p.to = nop_in_range(state_, {peak, reader}, rng);
    return p.to >= 0 && state_.can_add(p.unit, p.to);
  }

  void apply(const Proposal& p) {
    switch (p.move) {
      case Move::kAdd:
        state_.add(p.unit, p.to);
        break;
      case Move::kRemove:
        state_.remove(p.from);
        break;
      case Move::kRotate:
        state_.move(p.from, p.to);
        break;
    }
  }
  void log_accepted(const Proposal& p) {
    if (p.from >= 0) best_.record(p.from, kNop);
    if (p.to >= 0) best_.record(p.to, p.unit);
  }

  // Grouped units: the state's peak bounds the expanded sequence's from above. At each new
  // lowest state peak over the budget (by StageSettings::exact_peak_step and kExactCheckGapShare),
  // the simulator judges the expansion; when it fits, this state becomes the best and stage 1 may
  // stop.
  bool fits_exactly() {
    if (!settings_.exact_peak) return false;
    const int64_t step =
        lowest_checked_peak_ == std::numeric_limits<int64_t>::max()
            ? 0
            : std::max(settings_.exact_peak_step,
                       (lowest_checked_peak_ - context_.budget_bytes) / kExactCheckGapShare);
    if (state_.peak() + step >= lowest_checked_peak_) return false;
    lowest_checked_peak_ = state_.peak();
    const std::vector<int32_t> order = state_.sequence();
    const int64_t exact = settings_.exact_peak(order);
    int64_t steps = 0;
    for (int32_t u : order) steps += static_cast<int64_t>(units_.members_of(u).size());
    simulated_moves_ +=
        static_cast<int64_t>(kMovesPerSimulatedStep * degree_weight_ * static_cast<double>(steps));
    if (exact > context_.budget_bytes) return false;
    best_peak_ = exact;
    best_cost_ = state_.cost();
    best_.commit();
    return true;
  }

  // The best plan within budget has the least cost any plan can have: nothing left to improve.
  bool at_least_cost() const {
    return best_peak_ <= context_.budget_bytes && best_cost_ <= settings_.least_cost * (1 + 1e-9);
  }

  // What the convergence window watches: the user's objective, i.e. reaching the budget, then
  // a lower cost within it, or a lower peak while over it. A lower peak at the same cost within
  // the budget, or a lower annealing objective, does not count: both go on improving by tiny
  // amounts long after the plan has stopped changing in any way the user sees.
  bool improves_goal(int64_t peak, double cost) const {
    if (settings_.rotations_only) return peak < best_peak_;  // App. B.2: the objective is M
    const int64_t budget = context_.budget_bytes;
    const bool fits = peak <= budget, best_fits = best_peak_ <= budget;
    if (fits != best_fits) return fits;
    return fits ? cost < best_cost_ : peak < best_peak_;
  }

  void note_state(double f) {
    best_objective_ = std::min(best_objective_, f);
    const int64_t peak = state_.peak();
    const double cost = state_.cost();
    if (improves_goal(peak, cost)) last_improvement_ = iteration_;
    if (better_plan({peak, cost}, {best_peak_, best_cost_}, context_.budget_bytes)) {
      best_peak_ = peak;
      best_cost_ = cost;
      best_.commit();
    } else {
      best_.compact_if_long(state_);
    }
  }

  void sample(std::chrono::steady_clock::time_point start, int64_t it) {
    context_.series_time_s.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    context_.series_iteration.push_back(static_cast<double>(context_.iterations_before + it));
    context_.series_best_objective.push_back(best_objective_);
    context_.series_peak.push_back(static_cast<double>(best_peak_));
  }

  void report_progress(std::string_view stage_name, int64_t it, double& last_progress) {
    if (!context_.on_progress || context_.deadline == nullptr) return;
    const double now = context_.deadline->elapsed_s();
    if (now - last_progress < context_.progress_every_s) return;
    last_progress = now;
    context_.on_progress(
        Progress{.stage = stage_name,
                 .fraction = static_cast<double>(it) / static_cast<double>(settings_.iterations),
                 .iterations = context_.iterations_before + it,
                 .best_objective = best_objective_,
                 .best_peak_bytes = best_peak_,
                 .best_cost = best_cost_});
  }

  const UnitTable& units_;
  const StageSettings& settings_;
  WalkContext& context_;
  SaState state_;
  BestKeeper best_;
  std::vector<int32_t> addable_;
  std::vector<int32_t> producer_;  // by value, a unit that produces it (peak_moves only)
  int32_t peak_window_ = 0;        // slots after the peak where peak_proposal draws a reader
  int64_t best_peak_ = 0;
  double best_cost_ = 0;
  double best_objective_ = 0;
  int64_t iteration_ = 0;
  int64_t last_improvement_ = 0;  // iteration of the last new best plan or objective
  int64_t lowest_checked_peak_ = std::numeric_limits<int64_t>::max();
  int64_t simulated_moves_ = 0;  // the exact peak checks' moves (fits_exactly)
  const double degree_weight_ = degree_weight(units_);
  bool quenched_ = false;   // the convergence window fired once and the stage is cooling fast
  int64_t quench_end_ = 0;  // quench_in_full: the iteration where the quench has cooled fully
  double term_cost_ = std::numeric_limits<double>::quiet_NaN();  // the cost cost_term_ is of
  double cost_term_ = 0;
};

}  // namespace

double ObjectiveFunction::operator()(double peak, double cost) const {
  return memory_term(peak) * cost_term(cost);
}

double ObjectiveFunction::memory_term(double peak) const {
  switch (kind) {
    case Objective::kProduct:
      return std::max(budget, peak);
    case Objective::kStrict: {
      // L(x) = budget * (1 + x / 100): L(0) = budget, L(-100) = 0.
      const double x = 100.0 * (peak / budget - 1.0);
      const double elu = x > 0 ? x : std::expm1(x);
      return budget * (1.0 + elu / 100.0);
    }
    case Objective::kMemory:
      return peak;
  }
  return peak;
}

double ObjectiveFunction::cost_term(double cost) const {
  switch (kind) {
    case Objective::kProduct:
      return cost;
    case Objective::kStrict:
      return std::pow(cost, cost_exponent);
    case Objective::kMemory:
      return 1;
  }
  return 1;
}

double move_weight(int32_t slots) {
  return slots <= kReferenceSlots
             ? 1.0
             : std::pow(static_cast<double>(slots) / static_cast<double>(kReferenceSlots), 0.4);
}

double degree_weight(const UnitTable& units) {
  const double degree = static_cast<double>(units.input_ids.size() + units.output_ids.size()) /
                        std::max(1.0, static_cast<double>(units.num_units()));
  return degree <= kReferenceDegree ? 1.0 : std::sqrt(degree / kReferenceDegree);
}

StageResult run_stage(const UnitTable& units, std::span<const int32_t> start_order,
                      const StageSettings& settings, std::string_view stage_name,
                      WalkContext& context) {
  Annealer annealer(units, start_order, settings, context);
  return annealer.run(stage_name);
}

}  // namespace remat::fastsa
