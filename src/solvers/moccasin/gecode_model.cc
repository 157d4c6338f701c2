// gecode_model.cc — the only file that speaks Gecode: the retention-interval CP of MOCCASIN
// (Bartan et al. 2023, §2) posted as Gecode constraints, and the search (BAB, then restarts
// with large-neighbourhood search, solution-guided value selection).
#include <algorithm>
#include <gecode/int.hh>
#include <gecode/minimodel.hh>
#include <gecode/search.hh>
#include <limits>
#include <memory>
#include <random>

#include "moccasin/instance.h"

namespace remat::moccasin {
namespace {

using namespace Gecode;

// Values the branchers prefer (solution-guided search); aligned with the branched arrays.
struct Hint {
  std::vector<int> active;  // per optional copy (copy >= 2)
  std::vector<int> starts;  // per branched start
  std::vector<int> ends;    // per end variable
};

struct CopyVars {
  BoolVar active;
  IntVar start;
  std::vector<IntVar> ends;  // one per output
};

class Model : public IntMinimizeSpace {
 public:
  Model(const Instance& inst, bool phase1, const SearchParams& params)
      : phase1_(phase1), lns_fraction_(params.lns_fraction), seed_(params.seed) {
    const int32_t n = static_cast<int32_t>(inst.nodes.size());
    int32_t total_copies = 0;
    for (const NodeModel& node : inst.nodes) total_copies += node.copies;
    staged_ = inst.staged;
    scattered_lns_ = params.scattered_lns;
    horizon_ = inst.staged ? n * (n + 1) / 2 : total_copies;

    // Variables and constraints are posted in one fixed order: it is the propagators' order, and
    // so the search's.
    Posted posted;
    std::vector<std::vector<CopyVars>> vars(n);
    for (int32_t p = 0; p < n; ++p) vars[p] = post_node(inst, p, posted);
    const BoolVarArgs links = post_precedence(inst, vars);
    if (!inst.staged) distinct(*this, posted.all_active, posted.all_starts);
    post_memory(inst, posted);

    active_ = BoolVarArray(*this, posted.all_active);
    starts_ = IntVarArray(*this, posted.all_starts);
    optional_active_ = BoolVarArray(*this, posted.optional_active);
    branched_starts_ = IntVarArray(*this, posted.branched_starts);
    ends_ = IntVarArray(*this, posted.all_ends);
    links_ = BoolVarArray(*this, links);
    window_nodes_.reserve(static_cast<size_t>(n));
    for (int32_t p = 0; p < n; ++p) {
      window_nodes_.push_back(inst.nodes[p].copies);
    }
    post_branching(params.afc_branching);
  }

  Model(Model& other) : IntMinimizeSpace(other) {
    phase1_ = other.phase1_;
    staged_ = other.staged_;
    scattered_lns_ = other.scattered_lns_;
    horizon_ = other.horizon_;
    lns_fraction_ = other.lns_fraction_;
    seed_ = other.seed_;
    lns_round_ = other.lns_round_;
    lns_engine_ = other.lns_engine_;
    hint_ = other.hint_;
    window_nodes_ = other.window_nodes_;
    active_.update(*this, other.active_);
    starts_.update(*this, other.starts_);
    optional_active_.update(*this, other.optional_active_);
    branched_starts_.update(*this, other.branched_starts_);
    ends_.update(*this, other.ends_);
    links_.update(*this, other.links_);
    objective_.update(*this, other.objective_);
    peak_.update(*this, other.peak_);
  }
  Space* copy() override { return new Model(*this); }  // Gecode's cloning protocol
  IntVar cost() const override { return objective_; }

  void set_hint(const Solution& solution) {
    auto hint = std::make_shared<Hint>();
    hint->active = solution.hint_active;
    hint->starts = solution.hint_starts;
    hint->ends = solution.hint_ends;
    hint_ = hint;
  }
  void set_hint_from(const Model& solved) {
    auto hint = std::make_shared<Hint>();
    for (int i = 0; i < solved.optional_active_.size(); ++i)
      hint->active.push_back(solved.optional_active_[i].val());
    for (int i = 0; i < solved.branched_starts_.size(); ++i)
      hint->starts.push_back(solved.branched_starts_[i].val());
    for (int i = 0; i < solved.ends_.size(); ++i) hint->ends.push_back(solved.ends_[i].val());
    hint_ = hint;
  }

  // Fixes every branched variable to `solution` (a start of this instance); the precedence
  // links are left to the search. In phase 1 the peak is bounded by the solution's known peak.
  void fix_to(const Solution& solution) {
    int flat = 0;
    for (const std::vector<CopyValue>& node : solution.copies)
      for (const CopyValue& copy : node) {
        rel(*this, active_[flat], IRT_EQ, copy.active ? 1 : 0);
        rel(*this, starts_[flat], IRT_EQ, copy.start);
        ++flat;
      }
    for (int i = 0; i < ends_.size(); ++i) rel(*this, ends_[i], IRT_EQ, solution.hint_ends[i]);
    if (phase1_ && solution.peak >= 0 && solution.peak <= Int::Limits::max)
      rel(*this, peak_, IRT_LQ, static_cast<int>(solution.peak));
  }

  Solution extract(const Instance& inst) const {
    Solution solution;
    int flat = 0;
    for (const NodeModel& node : inst.nodes) {
      std::vector<CopyValue> copies;
      for (int32_t i = 0; i < node.copies; ++i, ++flat)
        copies.push_back({active_[flat].val() == 1, starts_[flat].val()});
      solution.copies.push_back(std::move(copies));
    }
    for (int i = 0; i < optional_active_.size(); ++i)
      solution.hint_active.push_back(optional_active_[i].val());
    for (int i = 0; i < branched_starts_.size(); ++i)
      solution.hint_starts.push_back(branched_starts_[i].val());
    for (int i = 0; i < ends_.size(); ++i) solution.hint_ends.push_back(ends_[i].val());
    solution.objective = objective_.val();
    if (phase1_) solution.peak = peak_.val();
    return solution;
  }
  int objective_value() const { return objective_.val(); }
  bool phase1() const { return phase1_; }

  // Restart-based search: the master keeps the best solution as the hint and bound.
  // Every run of the `index`-th RBS engine, its first included, is a neighbourhood.
  void begin_lns(uint64_t index) {
    lns_engine_ = index;
    lns_round_ = 1;
  }

  // Gecode's restart number repeats when a neighbourhood is exhausted without a solution, so the
  // master counts its rounds itself: every round then draws a new neighbourhood.
  bool master(const MetaInfo& mi) override {
    ++lns_round_;
    if (mi.type() == MetaInfo::RESTART && mi.last() != nullptr) {
      const Model& last = static_cast<const Model&>(*mi.last());
      constrain(last);
      set_hint_from(last);
    }
    return true;
  }
  // LNS: fix the presences and starts of every node that is not relaxed to the incumbent (from
  // begin_lns() on; before it, the search is complete).
  bool slave(const MetaInfo& mi) override {
    if (mi.type() != MetaInfo::RESTART || lns_round_ == 0 || !hint_ || hint_->ends.empty())
      return true;
    const int n = static_cast<int>(window_nodes_.size());
    std::seed_seq seeds{seed_, lns_engine_, lns_round_};
    std::mt19937_64 rng(seeds);
    const int width = std::max(1, static_cast<int>(lns_fraction_ * n));
    const int first = static_cast<int>(rng() % static_cast<uint64_t>(std::max(1, n - width + 1)));
    int opt = 0, st = 0, flat = 0;
    for (int p = 0; p < n; ++p) {
      // Window: consecutive nodes; scattered: each node with probability lns_fraction (the
      // values live across a peak come from all over the order).
      const bool relaxed = scattered_lns_
                               ? std::uniform_real_distribution<double>(0, 1)(rng) < lns_fraction_
                               : p >= first && p < first + width;
      for (int i = 0; i < window_nodes_[p]; ++i, ++flat) {
        if (!staged_ || i > 0) {
          if (!relaxed) rel(*this, starts_[flat], IRT_EQ, hint_->starts[st]);
          ++st;
        }
        if (i > 0) {
          if (!relaxed) rel(*this, active_[flat], IRT_EQ, hint_->active[opt]);
          ++opt;
        }
      }
    }
    return false;
  }

 private:
  // What the node copies post for the arrays, the memory constraint and the objective.
  struct Posted {
    BoolVarArgs optional_active;
    IntVarArgs branched_starts, all_ends, all_starts;
    BoolVarArgs all_active;
    IntVarArgs task_s, task_p, task_e;  // the cumulative's optional flexible tasks
    IntArgs task_u;
    BoolVarArgs task_m;
    IntArgs weights;  // the objective: weights x weighted
    BoolVarArgs weighted;
    int64_t total_demand = 0;
  };

  int32_t end_max() const { return horizon_ + 1; }

  // The copies of node p: their variables, their outputs' retention intervals, the order they are
  // used in, and graph outputs kept to the end by the last active copy.
  std::vector<CopyVars> post_node(const Instance& inst, int32_t p, Posted& posted) {
    const NodeModel& node = inst.nodes[p];
    const int32_t n = static_cast<int32_t>(inst.nodes.size());
    IntSet later_events = IntSet::empty;
    if (inst.staged) {
      std::vector<int> events;
      for (int32_t stage = p + 2; stage <= n; ++stage) events.push_back(staged_event(stage, p));
      // Gecode's IntArgs(std::vector) reads v[0] even when v is empty (UBSan).
      if (!events.empty()) later_events = IntSet(IntArgs(events));
    }
    std::vector<CopyVars> copies;
    for (int32_t i = 0; i < node.copies; ++i)
      copies.push_back(post_copy(inst, p, i, later_events, posted));
    // Copies are used in order and do not overlap (constraints 3 and the symmetry a^i -> a^i-1).
    for (int32_t i = 1; i < node.copies; ++i) {
      CopyVars& prev = copies[i - 1];
      CopyVars& cur = copies[i];
      rel(*this, cur.active, BOT_IMP, prev.active, 1);
      rel(*this, prev.start, IRT_LE, cur.start, Reify(cur.active, RM_IMP));
      for (const IntVar& end : prev.ends)
        rel(*this, end, IRT_LQ, cur.start, Reify(cur.active, RM_IMP));
    }
    // Graph outputs: the last active copy keeps them to the end.
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      if (!node.outputs[k].live_to_end) continue;
      for (int32_t i = 0; i < node.copies; ++i) {
        BoolVar last = i + 1 < node.copies ? expr(*this, copies[i].active && !copies[i + 1].active)
                                           : copies[i].active;
        rel(*this, copies[i].ends[k], IRT_EQ, end_max(), Reify(last, RM_IMP));
      }
    }
    return copies;
  }

  // Copy i of node p: active (always for the first), its start, and one end per output, each
  // output of non-zero size a task of the memory constraint (the node's temporary one more).
  CopyVars post_copy(const Instance& inst, int32_t p, int32_t i, const IntSet& later_events,
                     Posted& posted) {
    const NodeModel& node = inst.nodes[p];
    CopyVars copy;
    if (i == 0) {
      copy.active = BoolVar(*this, 1, 1);
      copy.start =
          inst.staged ? IntVar(*this, first_event(p), first_event(p)) : IntVar(*this, 1, horizon_);
    } else {
      copy.active = BoolVar(*this, 0, 1);
      copy.start = inst.staged ? IntVar(*this, later_events) : IntVar(*this, 1, horizon_);
      posted.optional_active << copy.active;
    }
    if (!inst.staged || i > 0) posted.branched_starts << copy.start;
    posted.all_starts << copy.start;
    posted.all_active << copy.active;
    posted.weights << node.weight;
    posted.weighted << copy.active;
    const int32_t start_max = copy.start.max();
    if (i > 0) {
      // Inactive copies are pinned to one canonical value: no symmetric search.
      BoolVar inactive = expr(*this, !copy.active);
      rel(*this, copy.start, IRT_EQ, start_max, Reify(inactive, RM_IMP));
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      IntVar end(*this, 2, end_max());
      rel(*this, end, IRT_GR, copy.start);
      if (i > 0) {
        BoolVar inactive = expr(*this, !copy.active);
        rel(*this, end, IRT_EQ, expr(*this, copy.start + 1), Reify(inactive, RM_IMP));
      }
      copy.ends.push_back(end);
      posted.all_ends << end;
      if (node.outputs[k].size > 0) {
        IntVar length(*this, 1, end_max());
        rel(*this, copy.start + length == end);
        posted.task_s << copy.start;
        posted.task_p << length;
        posted.task_e << end;
        posted.task_u << node.outputs[k].size;
        posted.task_m << copy.active;
        posted.total_demand += node.outputs[k].size;
      }
    }
    if (node.temp > 0) {
      posted.task_s << copy.start;
      posted.task_p << IntVar(*this, 1, 1);
      posted.task_e << expr(*this, copy.start + 1);
      posted.task_u << node.temp;
      posted.task_m << copy.active;
      posted.total_demand += node.temp;
    }
    return copy;
  }

  // Precedence (5): each active copy of v starts strictly inside an active copy of u's output:
  // one reified Boolean per (copy of v, copy of u) and a clause over them (see the docs). Returns
  // the Booleans.
  BoolVarArgs post_precedence(const Instance& inst, std::vector<std::vector<CopyVars>>& vars) {
    BoolVarArgs links;
    for (int32_t p = 0; p < static_cast<int32_t>(inst.nodes.size()); ++p) {
      for (const Use& use : inst.nodes[p].uses) {
        for (CopyVars& consumer : vars[p]) {
          BoolVarArgs options;
          for (CopyVars& producer : vars[use.producer]) {
            BoolVar x(*this, 0, 1);
            rel(*this, x, BOT_IMP, producer.active, 1);
            rel(*this, producer.start, IRT_LE, consumer.start, Reify(x, RM_IMP));
            rel(*this, producer.ends[use.output], IRT_GR, consumer.start, Reify(x, RM_IMP));
            options << x;
            links << x;
          }
          clause(*this, BOT_OR, options, BoolVarArgs() << consumer.active, 1);
        }
      }
    }
    return links;
  }

  // Memory (4): one cumulative over the optional flexible tasks; phase 1 minimises the peak above
  // the capacity, phase 2 the weighted cost within it.
  void post_memory(const Instance& inst, const Posted& posted) {
    if (phase1_) {
      peak_ = IntVar(*this, 0,
                     static_cast<int>(std::min<int64_t>(posted.total_demand, Int::Limits::max)));
      objective_ = IntVar(*this, inst.capacity, Int::Limits::max);
      max(*this, peak_, IntVar(*this, inst.capacity, inst.capacity), objective_);
      if (posted.task_s.size() > 0)
        cumulative(*this, peak_, posted.task_s, posted.task_p, posted.task_e, posted.task_u,
                   posted.task_m);
    } else {
      peak_ = IntVar(*this, 0, 0);  // unused in phase 2
      if (posted.task_s.size() > 0)
        cumulative(*this, inst.capacity, posted.task_s, posted.task_p, posted.task_e, posted.task_u,
                   posted.task_m);
      objective_ = IntVar(*this, 0, Int::Limits::max);
      linear(*this, posted.weights, posted.weighted, IRT_EQ, objective_);
    }
  }

  // Solution-guided value selection for the starts: the incumbent's value when still possible.
  static int guided_start(const Space& home, IntVar x, int i) {
    const Model& m = static_cast<const Model&>(home);
    if (m.hint_ && i < static_cast<int>(m.hint_->starts.size()) && x.in(m.hint_->starts[i]))
      return m.hint_->starts[i];
    return x.min();
  }

  void post_branching(bool afc) {
    // (1) recomputations off first, (2) starts in event order, values from the hint when it is
    // still in the domain. Once the presences and starts are fixed, the ends and the precedence
    // links are functions of them (a read is served by the latest earlier copy, which makes its
    // earliest end dominant): they are assigned without alternatives, so the search never
    // revisits them, and (3) phase 1's peak last.
    branch(*this, optional_active_, BOOL_VAR_NONE(),
           BOOL_VAL([](const Space& home, BoolVar x, int i) {
             const Model& m = static_cast<const Model&>(home);
             if (m.hint_ && i < static_cast<int>(m.hint_->active.size())) return m.hint_->active[i];
             return x.min();
           }));
    if (afc)
      branch(*this, branched_starts_, INT_VAR_AFC_SIZE_MAX(0.99), INT_VAL(guided_start));
    else
      branch(*this, branched_starts_, INT_VAR_NONE(), INT_VAL(guided_start));
    assign(*this, links_, BOOL_ASSIGN_MIN());
    assign(*this, ends_, INT_ASSIGN_MIN());
    branch(*this, peak_, INT_VAL_MIN());  // phase 1: the peak of the fixed schedule
  }

  bool phase1_ = false;
  bool staged_ = true;
  bool scattered_lns_ = false;
  int32_t horizon_ = 0;
  double lns_fraction_ = 0.2;
  uint64_t seed_ = 1;
  uint64_t lns_round_ = 0;   // master() calls since begin_lns(); 0: complete search
  uint64_t lns_engine_ = 0;  // which RBS engine of the phase
  std::shared_ptr<const Hint> hint_;
  std::vector<int32_t> window_nodes_;  // copies per node, in order
  BoolVarArray active_;                // every copy, node-major
  IntVarArray starts_;                 // every copy, node-major
  BoolVarArray optional_active_;
  IntVarArray branched_starts_;
  IntVarArray ends_;
  BoolVarArray links_;
  IntVar objective_;
  IntVar peak_;
};

// Ends a phase's searches on its work (propagator runs over all its engines), the solve's clock
// or an interrupt (Deadline::expired sees both), or a failure count. Gecode asks it at every node
// it explores, so an interrupt is seen within a node's propagation; at one thread the counts, and
// so the point where the work limit stops a search, are the same on any machine.
class PhaseStop : public Search::Stop {
 public:
  PhaseStop(double work_units, double propagations_per_unit, const Deadline* deadline)
      : max_propagations_(work_ops(work_units, propagations_per_unit)), deadline_(deadline) {}
  // A search whose engine also ends after `fails` failures (that end is no limit of the phase).
  void limit_failures(uint64_t fails) { max_failures_ = fails; }
  // The part of the work left to the next engine (a share of the phase's, e.g. its proof).
  void share(double fraction) {
    engine_limit_ =
        used_ + static_cast<int64_t>(fraction * static_cast<double>(max_propagations_ - used_));
  }

  bool stop(const Search::Statistics& s, const Search::Options&) override {
    const int64_t used = used_ + static_cast<int64_t>(s.propagate);
    if (used >= std::min(engine_limit_, max_propagations_)) {
      work_limit_hit_ = used >= max_propagations_;
      return true;
    }
    if (deadline_ != nullptr && deadline_->expired()) {
      time_limit_hit_ = true;
      return true;
    }
    return s.fail >= max_failures_;
  }
  // An engine ended: its propagations count against the phase from now on.
  void add(const Search::Statistics& s) {
    used_ += static_cast<int64_t>(s.propagate);
    engine_limit_ = std::numeric_limits<int64_t>::max();
    max_failures_ = std::numeric_limits<uint64_t>::max();
  }
  void record(PhaseResult& result) const {
    result.propagations = used_;
    result.work_limit_hit = work_limit_hit_;
    result.time_limit_hit = time_limit_hit_;
  }

 private:
  int64_t max_propagations_;
  const Deadline* deadline_;
  int64_t used_ = 0;
  int64_t engine_limit_ = std::numeric_limits<int64_t>::max();
  uint64_t max_failures_ = std::numeric_limits<uint64_t>::max();
  bool work_limit_hit_ = false, time_limit_hit_ = false;

 public:
  // The phase's work is spent or its clock expired: no further engine.
  bool spent_or_expired() const {
    return used_ >= max_propagations_ || (deadline_ != nullptr && deadline_->expired());
  }
};

void accumulate(PhaseResult& result, const Search::Statistics& stats, PhaseStop& stop) {
  result.failures += static_cast<int64_t>(stats.fail);
  result.nodes += static_cast<int64_t>(stats.node);
  result.restarts += static_cast<int64_t>(stats.restart);
  stop.add(stats);
}

// The start as a solution of the phase's model: its variables fixed, the precedence links
// found by a short search (propagation decides nearly all). Null when the start violates the
// phase's constraints (in phase 2: a plan over the capacity).
std::unique_ptr<Model> realise(const Model& root, const Solution& start, PhaseResult& result,
                               PhaseStop& stop) {
  std::unique_ptr<Model> fixed(static_cast<Model*>(root.clone()));
  fixed->fix_to(start);
  if (fixed->status() == SS_FAILED) return nullptr;
  Search::Options options;
  stop.limit_failures(10'000);
  options.stop = &stop;
  DFS<Model> engine(fixed.get(), options);
  std::unique_ptr<Model> found(engine.next());
  accumulate(result, engine.statistics(), stop);
  return found;
}

PhaseResult run_phase(const Instance& inst, bool phase1, const Solution* start,
                      const SearchParams& params) {
  PhaseResult result;
  PhaseStop stop(params.work_limit, propagations_per_unit(inst), params.deadline);
  auto root = std::make_unique<Model>(inst, phase1, params);
  if (root->status() == SS_FAILED) {
    result.proved = true;
    return result;
  }
  std::unique_ptr<Model> best;
  if (start != nullptr) {
    root->set_hint(*start);
    best = realise(*root, *start, result, stop);
    if (best) {
      result.start_used = true;
      ++result.solutions;
      result.best_found = std::chrono::steady_clock::now();
      // The complete search below looks only for strictly better plans.
      root->constrain(*best);
      if (root->status() == SS_FAILED) {
        result.proved = true;
        result.found = true;
        result.best = best->extract(inst);
        return result;
      }
    }
  }

  // Stage A: complete branch and bound with its share of the work; exhausting it proves the
  // phase optimal.
  Search::Options options;
  options.threads = params.threads;
  options.stop = &stop;
  stop.share(params.proof_fraction);
  {
    BAB<Model> engine(root.get(), options);
    while (Model* solution = engine.next()) {
      best.reset(solution);
      ++result.solutions;
      result.best_found = std::chrono::steady_clock::now();
    }
    accumulate(result, engine.statistics(), stop);
    result.proved = !engine.stopped();
  }
  if (!result.proved && best && !stop.spent_or_expired()) {
    // Stage B: restarts with LNS around the incumbent (Luby cutoffs on failures). RBS takes its
    // first run for the complete search and ends when it is exhausted; here every run is a
    // neighbourhood (stage A was the complete search), so an exhausted first neighbourhood only
    // means: start a new engine with the next neighbourhoods. The engines end when the phase's
    // work is spent (or the clock), or when nothing better than the incumbent is left (a proof).
    for (uint64_t engine_index = 0;; ++engine_index) {
      root->set_hint_from(*best);
      root->constrain(*best);
      if (root->status() == SS_FAILED) {
        result.proved = true;
        break;
      }
      root->begin_lns(engine_index);
      Search::Options lns;
      lns.threads = params.threads;
      lns.stop = &stop;
      lns.cutoff = Search::Cutoff::luby(50);
      RBS<Model, BAB> engine(root.get(), lns);
      while (Model* solution = engine.next()) {
        best.reset(solution);
        ++result.solutions;
        result.best_found = std::chrono::steady_clock::now();
      }
      accumulate(result, engine.statistics(), stop);
      if (engine.stopped()) break;
    }
  }
  stop.record(result);
  if (result.proved) result.work_limit_hit = result.time_limit_hit = false;
  if (best) {
    result.found = true;
    result.best = best->extract(inst);
  }
  return result;
}

}  // namespace

PhaseResult solve_phase1(const Instance& instance, const Solution* start,
                         const SearchParams& params) {
  return run_phase(instance, true, start, params);
}

PhaseResult solve_phase2(const Instance& instance, const Solution* start,
                         const SearchParams& params) {
  return run_phase(instance, false, start, params);
}

double gecode_range_use(const Instance& inst) {
  const auto n = static_cast<int64_t>(inst.nodes.size());
  int64_t total_copies = 0;
  for (const NodeModel& node : inst.nodes) total_copies += node.copies;
  const int64_t horizon = inst.staged ? n * (n + 1) / 2 : total_copies;
  // A start plus a length (at most horizon + 1 each) must be an Int value.
  const double horizon_use = static_cast<double>(2 * (horizon + 1)) / Int::Limits::max;
  if (horizon_use > 1) return horizon_use;  // (and staged_event() would overflow below)
  // Each cumulative task: its start domain's width (staged: copy 1 is fixed, a later copy of the
  // node at p ranges over stages p + 2 .. n) and its demand, as the model posts them.
  auto start_width = [&](int32_t p, int32_t copy) -> double {
    if (!inst.staged) return static_cast<double>(horizon);
    if (copy == 0) return 1;
    return staged_event(static_cast<int32_t>(n), p) - staged_event(p + 2, p) + 1;
  };
  double widths = 0, tasks = 0, demand = 0;
  auto add_task = [&](int32_t units, double width) {
    if (units > 0) widths += width, tasks += 1, demand += units;
  };
  for (int32_t p = 0; p < static_cast<int32_t>(n); ++p) {
    const NodeModel& node = inst.nodes[static_cast<size_t>(p)];
    for (int32_t copy = 0; copy < node.copies; ++copy) {
      const double width = start_width(p, copy);
      for (const Output& output : node.outputs) add_task(output.size, width);
      add_task(node.temp, width);
    }
  }
  // Phase 1's capacity variable reaches the whole demand; phase 2's is the capacity. Gecode's
  // check is exact in 64 bits; 2^62 leaves room for the rounding of these doubles.
  const double capacity = std::max(std::min(demand, static_cast<double>(Int::Limits::max)),
                                   static_cast<double>(inst.capacity));
  return std::max(horizon_use, capacity * widths * tasks / 0x1p62);
}

}  // namespace remat::moccasin
