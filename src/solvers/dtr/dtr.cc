#include "dtr/dtr.h"

#include <algorithm>
#include <optional>

#include "dtr/evictor.h"
#include "remat/error.h"
#include "remat/params.h"
#include "remat/simulate.h"
#include "remat/toolkit.h"

namespace remat::dtr {
namespace {

// Operations per work unit (docs/limits.md): replayed steps with their reads and writes, heap
// moves and scored values, about a CPU second of the reference machine on `remat gen
// random-layered --nodes 10000` at 50 % (`remat solve --solver dtr` prints seconds and work).
constexpr double kOpsPerUnit = 5e7;
// search_lower_peak's replays over budget: at the budget and kPeakReplays - 1 steps above it.
constexpr int kPeakReplays = 4;

struct DtrParams {
  bool neighbours = true;
  int64_t slack_runs = 6;
  int64_t max_recomputations = 10;
};

const ParamTable<DtrParams>& param_table() {
  static const ParamTable<DtrParams> table(
      "dtr",
      {{{"neighbours", "`true`", "",
         "the score counts the cost of the evicted values its recomputation needs (h_DTR's "
         "evicted neighbourhood, 32 nodes at most); `false`: its own producer's cost only"},
        flag(&DtrParams::neighbours)},
       {{"slack_runs", "6", "replays",
         "further replays at a higher internal budget while the simulator's peak leaves room "
         "under the budget (0: the first replay only)"},
        integer(&DtrParams::slack_runs, 0, 64)},
       {{"max_recomputations", "10", "x nodes",
         "a replay stops evicting once it has recomputed this many times the graph's nodes (where "
         "each recomputation evicts what the next needs) and finishes without evicting"},
        integer(&DtrParams::max_recomputations, 0, 1000)}});
  return table;
}

// The simulator's work on `sequence`, in the replay's operations.
int64_t simulation_ops(const Graph& g, const Sequence& sequence) {
  int64_t ops = 0;
  for (NodeId n : sequence) ops += step_ops(g.node(n));
  return ops;
}

class Replays {
 public:
  Replays(const Graph& graph, const SolveOptions& options, const DtrParams& params)
      : g_(graph),
        budget_(options.budget.bytes),
        params_(params),
        limits_(options.work_limit, options.time_limit_s),
        ops_limit_(work_ops(limits_.left(), kOpsPerUnit)),
        evictor_(graph),
        ops_(evictor_.pass_ops()) {}

  Plan run() {
    replay(budget_);
    search_slack();
    search_lower_peak();
    limits_.spend(static_cast<double>(ops_) / kOpsPerUnit);
    Plan plan;
    plan.stats.status = best_->fits ? SolveStatus::kFeasible : SolveStatus::kOverBudget;
    plan.stats.stopped(stopped_);
    plan.stats.work = limits_.spent();
    plan.stats.iterations = replays_;
    plan.stats.cost_lower_bound = cost_lower_bound(g_);
    plan.stats.add_counter("replays", static_cast<double>(replays_));
    plan.stats.add_counter("evictions", static_cast<double>(best_->evictions));
    plan.stats.add_counter("recomputed_steps", static_cast<double>(best_->recomputed_steps));
    plan.stats.add_counter("internal_budget_bytes", static_cast<double>(best_->internal_budget));
    plan.stats.add_counter("thrashed", thrashed_ ? 1 : 0);
    plan.sequence = std::move(best_->sequence);
    return plan;
  }

 private:
  struct Replay {
    Sequence sequence;
    int64_t peak_bytes = 0;  // the simulator's
    double cost = 0;         // the simulator's
    bool fits = false;
    int64_t internal_budget = 0;
    int64_t evictions = 0;
    int64_t recomputed_steps = 0;
  };

  // One replay at `internal` bytes, judged by the simulator and kept if it is the better plan.
  // Returns its evaluation.
  Evaluation replay(int64_t internal) {
    // Half of the work left: the simulation of its plan costs at most what the replay did.
    RunSettings settings{.budget = internal,
                         .ops_limit = (ops_limit_ - ops_) / 2,
                         .max_recomputed_steps = params_.max_recomputations * g_.num_nodes(),
                         .neighbours = params_.neighbours,
                         .hold_unrecomputable = hold_};
    EvictionRun run = evictor_.run(settings, limits_.deadline());
    ops_ += run.ops;
    if (run.needs_freed_value) {
      // A recomputation needed a value of a non-recomputable node after its last read: from now
      // on such values are held while something made from them may be needed.
      hold_ = true;
      settings.hold_unrecomputable = true;
      settings.ops_limit = (ops_limit_ - ops_) / 2;
      run = evictor_.run(settings, limits_.deadline());
      ops_ += run.ops;
    }
    ++replays_;
    thrashed_ = thrashed_ || run.thrashed;
    if (run.cut_short)
      stopped_ = std::max(stopped_, limits_.expired() ? limits_.reason() : StopReason::kWorkLimit);
    last_ops_ = run.ops;
    Evaluation e = simulate(g_, run.sequence);
    REMAT_CHECK(e.valid, "dtr: a replay gave an invalid sequence: " + e.error);
    ops_ += simulation_ops(g_, run.sequence);
    const bool fits = e.peak_bytes <= budget_;
    if (!best_ || better_plan({e.peak_bytes, e.cost}, {best_->peak_bytes, best_->cost}, budget_))
      best_ = Replay{.sequence = std::move(run.sequence),
                     .peak_bytes = e.peak_bytes,
                     .cost = e.cost,
                     .fits = fits,
                     .internal_budget = internal,
                     .evictions = run.evictions,
                     .recomputed_steps = run.recomputed_steps};
    return e;
  }

  // The replay keeps a value until it evicts it, the simulator only until its last read, so a
  // replay at the budget often peaks below it. Higher internal budgets evict less: the highest
  // whose plan the simulator still finds within the budget is searched for, growing by the room
  // left while they fit, then halving the gap to the first that did not.
  void search_slack() {
    if (!best_ || !best_->fits || best_->recomputed_steps == 0) return;
    int64_t fits_at = budget_, fails_at = -1;
    int64_t room = budget_ - best_->peak_bytes;
    for (int64_t k = 0; k < params_.slack_runs; ++k) {
      const int64_t internal =
          fails_at < 0 ? fits_at + std::max<int64_t>(room, 1) : fits_at + (fails_at - fits_at) / 2;
      if (internal <= fits_at || (fails_at >= 0 && internal >= fails_at)) return;
      if (!room_for_a_replay()) return;
      const Evaluation e = replay(internal);
      if (e.peak_bytes <= budget_) {
        fits_at = internal;
        room = budget_ - e.peak_bytes;
      } else {
        fails_at = internal;
      }
    }
  }

  // Over the budget, a replay at a higher internal budget may still peak lower (at a tight one
  // each recomputation can evict what the next needs, until max_recomputations stops it): a few
  // between the budget and the default schedule's peak, the lowest-peak plan kept.
  void search_lower_peak() {
    const int64_t top = g_.bounds().baseline_peak_bytes;
    for (int k = 1; k < kPeakReplays && !best_->fits && top > budget_; ++k) {
      if (!room_for_a_replay()) return;
      replay(budget_ + (top - budget_) * k / kPeakReplays);
    }
  }

  // Whether the work and the clock leave room for one more replay, which costs about what the
  // last one did; none is started that the limit would cut.
  bool room_for_a_replay() {
    if (ops_ + 2 * last_ops_ > ops_limit_) {
      stopped_ = std::max(stopped_, StopReason::kWorkLimit);
      return false;
    }
    if (limits_.expired()) {
      stopped_ = std::max(stopped_, limits_.reason());
      return false;
    }
    return true;
  }

  const Graph& g_;
  const int64_t budget_;
  const DtrParams params_;
  Limits limits_;
  const int64_t ops_limit_;
  Evictor evictor_;
  int64_t ops_ = 0;
  int64_t last_ops_ = 0;
  int64_t replays_ = 0;
  bool hold_ = false;
  bool thrashed_ = false;  // a replay stopped evicting on max_recomputations
  StopReason stopped_ = StopReason::kConverged;
  std::optional<Replay> best_;
};

class DtrSolver final : public Solver {
 public:
  Plan solve(const Graph& graph, const SolveOptions& options) override {
    return Replays(graph, options, param_table().parse(options.params)).run();
  }
};

}  // namespace

std::unique_ptr<Solver> make(const SolverDirectory&) { return std::make_unique<DtrSolver>(); }

std::span<const ParamInfo> params() { return param_table().info(); }

}  // namespace remat::dtr
