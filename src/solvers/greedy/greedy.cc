#include "greedy.h"

#include <algorithm>
#include <optional>

#include "recomputations.h"
#include "remat/params.h"
#include "remat/toolkit.h"

namespace remat::greedy {
namespace {

// Indexed steps and priced values per work unit (docs/limits.md): about a CPU second of the
// reference machine on `remat gen joint --nodes 6000` graphs (`remat solve --solver greedy`
// prints the seconds and the work).
constexpr double kOpsPerUnit = 5e8;

struct GreedyParams {
  int64_t chain_depth = 4;
};

const ParamTable<GreedyParams>& param_table() {
  static const ParamTable<GreedyParams> table(
      "greedy", {{{"chain_depth", "`4`", "steps",
                   "how many forward steps one recomputation may chain back through"},
                  integer(&GreedyParams::chain_depth, 0, 64)}});
  return table;
}

// The best move of a round: the largest peak drop per unit of cost, the first such in the
// schedule's order on a tie.
struct Choice {
  size_t move = 0;
  int32_t at = -1;
  double gain = 0;
};

class Greedy {
 public:
  Greedy(const Graph& graph, const SolveOptions& options, int chain_depth)
      : graph_(graph),
        budget_(options.budget.bytes),
        limits_(options.work_limit, options.time_limit_s),
        ops_limit_(work_ops(limits_.left(), kOpsPerUnit)),
        sequence_(default_schedule(graph)),
        eval_(simulate(graph, sequence_, {.timeline = true})),
        moves_(find_moves(graph, sequence_, chain_depth)),
        applied_(moves_.moves.size(), 0),
        pricer_(graph) {
    for (NodeId n : sequence_) reads_ += static_cast<int64_t>(graph.node(n).inputs.size());
  }

  Plan run() {
    Plan plan;
    while (eval_.peak_bytes > budget_) {
      const int64_t round = round_ops();
      if (ops_ + round > ops_limit_) {
        limits_.note_work_limit();
        plan.stats.stopped(StopReason::kWorkLimit);
        break;
      }
      if (limits_.expired()) {
        plan.stats.stopped(limits_.reason());
        break;
      }
      ops_ += round;
      const std::optional<Choice> choice = best_move();
      if (!choice) break;
      apply(*choice);
    }
    limits_.spend(static_cast<double>(ops_) / kOpsPerUnit);
    plan.sequence = std::move(sequence_);
    plan.stats.status = SolveStatus::kFeasible;
    plan.stats.cost_lower_bound = cost_lower_bound(graph_);
    plan.stats.work = limits_.spent();
    plan.stats.iterations = rounds_;
    plan.stats.add_counter("moves", static_cast<double>(moves_.moves.size()));
    plan.stats.add_counter("recomputations", static_cast<double>(rounds_));
    plan.stats.add_counter("recomputed_steps", static_cast<double>(recomputed_steps_));
    return plan;
  }

 private:
  // A round's work, counted before it runs so that no round starts past the work limit.
  int64_t round_ops() const {
    const auto steps = static_cast<int64_t>(sequence_.size());
    int64_t ops = InsertionPricer::index_ops(steps, reads_) + steps;  // and the simulation
    for (size_t k = 0; k < moves_.moves.size(); ++k)
      if (!applied_[k]) ops += InsertionPricer::price_ops(moves_.moves[k].touches, steps);
    return ops;
  }

  std::optional<Choice> best_move() {
    pricer_.index(sequence_, eval_.timeline);
    std::optional<Choice> best;
    for (size_t k = 0; k < moves_.moves.size(); ++k) {
      if (applied_[k]) continue;
      const Move& move = moves_.moves[k];
      const int32_t at = pricer_.first_read_of(move.step, moves_.backward_begin + 1);
      if (at < 0) continue;
      const std::optional<int64_t> peak = pricer_.peak_with(move.chain, at);
      if (!peak || *peak >= eval_.peak_bytes) continue;
      const double gain = static_cast<double>(eval_.peak_bytes - *peak) / std::max(move.cost, 1.0);
      if (!best || gain > best->gain) best = Choice{.move = k, .at = at, .gain = gain};
    }
    return best;
  }

  void apply(const Choice& choice) {
    const Move& move = moves_.moves[choice.move];
    sequence_.insert(sequence_.begin() + choice.at, move.chain.begin(), move.chain.end());
    for (NodeId n : move.chain) reads_ += static_cast<int64_t>(graph_.node(n).inputs.size());
    applied_[choice.move] = 1;
    eval_ = simulate(graph_, sequence_, {.timeline = true});  // the judge's figures
    ++rounds_;
    recomputed_steps_ += static_cast<int64_t>(move.chain.size());
  }

  const Graph& graph_;
  const int64_t budget_;
  Limits limits_;
  const int64_t ops_limit_;
  Sequence sequence_;
  Evaluation eval_;
  const Moves moves_;
  std::vector<char> applied_;
  InsertionPricer pricer_;
  int64_t reads_ = 0;  // input slots of the sequence's steps
  int64_t ops_ = 0;
  int64_t rounds_ = 0;
  int64_t recomputed_steps_ = 0;
};

class GreedySolver final : public Solver {
 public:
  Plan solve(const Graph& graph, const SolveOptions& options) override {
    const GreedyParams params = param_table().parse(options.params);
    return Greedy(graph, options, static_cast<int>(params.chain_depth)).run();
  }
};

}  // namespace

std::unique_ptr<Solver> make(const SolverDirectory&) { return std::make_unique<GreedySolver>(); }

std::span<const ParamInfo> params() { return param_table().info(); }

}  // namespace remat::greedy
