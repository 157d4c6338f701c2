#include "auto/auto.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "auto/two_pass.h"
#include "remat/error.h"
#include "remat/simulate.h"
#include "remat/toolkit.h"

namespace remat::auto_solver {
namespace {

constexpr std::string_view kName = "auto";

// When `auto` keeps improving its best plan after the finisher's runs (Portfolio::improve).
enum class Anytime { kAuto, kOn, kOff };

struct AutoParams {
  std::vector<std::string> members;      // as listed; empty: the whole portfolio
  std::optional<int64_t> max_nodes;      // overrides the node cap of members that have one
  int64_t anytime_milp_max_nodes = 120;  // the anytime rounds' MILP (checkmate) on graphs up to it
  bool two_pass = true;                  // FastSA on two passes when nothing else fits (two_pass.h)
  Anytime anytime = Anytime::kAuto;      // auto: when the work limit is above the default
  bool quick = true;                     // members' first runs with quick_settings
  // The deferred cold run is skipped where the best plan after the warm runs costs at most this
  // many points of CI above the least possible cost (cold_run_cannot_pay): the cold run cannot
  // gain more there, and this is the tolerance of the planning-speed bar (a plan within a point of
  // CI of a 60-unit search's). bench/auto_cold_run_bench.py measures what skipping it lost, and
  // what it won where it ran. On a training step's joint graph all of the recomputation is a
  // fraction of a point, so remat.torch.partition asks for 0.
  double cold_run_gain_points = 1.0;
  std::map<std::string, ParamMap> member_params;  // "fastsa.slots=..." -> member_params["fastsa"]
};

std::vector<std::string> split_names(std::string_view text) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    if (comma > begin) out.emplace_back(text.substr(begin, comma - begin));
    begin = comma + 1;
  }
  return out;
}

// The names are checked against the portfolio's rows once they are known (parse_auto_params).
void set_members(AutoParams& p, const std::string& listed) {
  p.members = split_names(listed);
  if (p.members.empty()) throw BadParamValue{"a comma-separated list of members"};
}

void set_max_nodes(AutoParams& p, const std::string& text) {
  struct Cap {
    int64_t nodes = 0;
  } cap;
  integer(&Cap::nodes, 0)(cap, text);
  p.max_nodes = cap.nodes;
}

const ParamTable<AutoParams>& auto_param_table() {
  static const ParamTable<AutoParams> table(
      kName,
      {
          {{"members", "all", "",
            "comma-separated subset of the members above, run in the order listed; `none` "
            "always runs"},
           set_members},
          {{"checkmate_max_nodes", "30", "nodes",
            "members with a node cap in the portfolio (checkmate) run only on graphs with "
            "at most this many nodes"},
           set_max_nodes},
          {{"two_pass", "`true`", "",
            "when nothing fits after FastSA's cold run, FastSA on a plan "
            "that makes the outputs filling the last steps' memory (weight gradients) in "
            "a second pass"},
           flag(&AutoParams::two_pass)},
          {{"anytime", "`auto`", "",
            "`true`: after the finisher's runs, checkmate's MILP (on graphs of at most "
            "anytime_checkmate_max_nodes) and then FastSA keep improving the best plan "
            "(restarts from it with new seeds) until the work limit ends or the plan has "
            "the least possible cost; `auto`: when the work limit is above the default"},
           choice(&AutoParams::anytime,
                  {{"auto", Anytime::kAuto}, {"true", Anytime::kOn}, {"false", Anytime::kOff}})},
          {{"anytime_checkmate_max_nodes", "120", "nodes",
            "the anytime rounds start with checkmate's MILP, warm-started from the best plan, "
            "on graphs with at most this many nodes (0: never)"},
           integer(&AutoParams::anytime_milp_max_nodes, 0)},
          {{"quick", "`true`", "",
            "the members' runs before the anytime rounds (FastSA's cold run included) stop "
            "sooner than the members' own defaults: FastSA's convergence window 2,000 x nodes "
            "within [25,000, 250,000], or 50 x nodes when more, rockmate's grid 3x3 of MILPs of "
            "at most 100 iterations (MEMBER.KEY=VALUE overrides each); `false`: the members' "
            "defaults"},
           flag(&AutoParams::quick)},
          {{"cold_run_gain_points", "1", "points of CI",
            "where another member's cheap plan fits, FastSA's cold run after the warm runs from "
            "it is skipped when their best plan costs at most this many points of CI above the "
            "least possible cost; 0: it runs unless that plan has the least cost"},
           real(&AutoParams::cold_run_gain_points, 0, 100)},
      });
  return table;
}

// The portfolio's rows in the order they run: the baseline first, the members in registry order,
// the finisher last.
std::vector<const SolverEntry*> portfolio_rows(const SolverDirectory& others) {
  std::vector<const SolverEntry*> rows;
  for (PortfolioRole role :
       {PortfolioRole::kBaseline, PortfolioRole::kMember, PortfolioRole::kFinisher})
    for (const SolverEntry& row : others.rows())
      if (row.portfolio.role == role) rows.push_back(&row);
  return rows;
}

std::string member_names(std::span<const SolverEntry* const> rows) {
  std::vector<std::string_view> names;
  for (const SolverEntry* row : rows) names.push_back(row->name);
  return fmt::format("{}", fmt::join(names, ", "));
}

const SolverEntry* find_member(std::span<const SolverEntry* const> rows, std::string_view name) {
  for (const SolverEntry* row : rows)
    if (row->name == name) return row;
  return nullptr;
}

AutoParams parse_auto_params(const ParamMap& params, std::span<const SolverEntry* const> rows) {
  ParamMap own;
  std::map<std::string, ParamMap> member_params;
  for (const auto& [key, value] : params) {
    const size_t dot = key.find('.');
    if (dot == std::string::npos) {
      own[key] = value;
      continue;
    }
    const std::string member = key.substr(0, dot);
    if (find_member(rows, member) == nullptr)
      throw InputError(fmt::format("auto: parameter '{}' names '{}', not a member (members: {})",
                                   key, member, member_names(rows)));
    member_params[member][key.substr(dot + 1)] = value;
  }
  AutoParams p = auto_param_table().parse(own);
  p.member_params = std::move(member_params);
  for (const std::string& name : p.members)
    if (find_member(rows, name) == nullptr)
      throw_bad_param(
          kName, "members", own.at("members"),
          fmt::format("members of: {}; '{}' is not a member", member_names(rows), name));
  if (p.members.empty())
    for (const SolverEntry* row : rows) p.members.emplace_back(row->name);
  return p;
}

// FastSA's quick window: a quarter of its own default's million idle iterations, as small as 25 k
// on a graph of a few nodes (below that default's), 50 per node on large graphs.
int64_t quick_fastsa_window(int64_t nodes) {
  return std::max({std::min<int64_t>(250'000, 2'000 * nodes), int64_t{25'000}, 50 * nodes});
}

// The settings `auto` gives a member's runs before the anytime rounds (FastSA's cold run too),
// where `given` (the user's MEMBER.KEY=VALUE) names none: the portfolio's first plan in seconds,
// more work to the rounds. FastSA stops a stage after a shorter convergence window (it still
// cools to its final temperature first); rockmate's option grid has a ninth of its MILPs, each
// capped lower (tighter grids matter at budgets near the lower bound, little at half the peak).
// bench/auto_speed_bench.py measures the portfolio against a 60-unit search.
ParamMap quick_settings(std::string_view member, const Graph& g, const ParamMap& given) {
  ParamMap out;
  if (member == "fastsa" && !given.contains("schedule") && !given.contains("convergence_window"))
    out["convergence_window"] = std::to_string(quick_fastsa_window(g.num_nodes()));
  if (member == "rockmate") {
    out["budgets"] = "3x3";
    out["milp_iterations"] = "100";
  }
  for (const auto& [key, value] : given) out[key] = value;
  return out;
}

// The settings of a two-pass plan's first pass (run_two_pass) where `given` (the user's
// MEMBER.KEY=VALUE and the quick settings) names none. Its budget sits close to its own floor
// (defer_outputs defers the fewest outputs that reach it), so the first plan that fits, where
// FastSA's stage 1 stops by default, recomputes far more than it must, and stage 2 can barely
// change it within the budget. Stage 1 annealed to its end, from ten times the default initial
// temperature, finds cheaper first passes for less work (bench/auto_speed_bench.py: ResNet-18 at
// 50 %); when its plan is over the budget, the first pass runs again with the member's settings.
// Its plans fall into a few cost levels (which large convolutions run twice), and a run rarely
// leaves the level it settles in, so several short tries (kFirstPassTries, each at two fifths of
// the quick window where the quick settings chose it: `quick_window`; every other one with the
// dear nodes pinned, two_pass.h) with the product objective (which settles in the cheapest levels
// more often) reach them more surely than a few long ones (bench/auto_speed_bench.py: ResNet-18
// at 50 %).
ParamMap first_pass_settings(std::string_view member, const Graph& g, const ParamMap& given,
                             bool quick_window) {
  ParamMap out = given;
  if (member == "fastsa") {
    out.try_emplace("stop_at_budget", "false");
    out.try_emplace("initial_temperature_pct", "1");
    out.try_emplace("objective", "product");
    if (quick_window)
      out["convergence_window"] = std::to_string(quick_fastsa_window(g.num_nodes()) * 2 / 5);
  }
  return out;
}

// The seeds of a two-pass plan's first pass outside the anytime rounds (solve_first_pass).
constexpr int kFirstPassTries = 5;

// The settings of a FastSA run from the best plan that fits before the anytime rounds (the
// cheapest member's, or FastSA's own), where the user's parameters name none: stage 2 starts at a
// thirtieth of FastSA's initial temperature (0.1 % of the start's objective), a re-anneal near
// the start rather than a restart. From FastSA's own temperature, the quick convergence window
// ends the run before it has cooled back to plans as good as the start, so the start's structure
// is lost for the cost of the run (bench/auto_speed_bench.py: joint_1000 at 50 %, from rockmate's
// plan). From a plan far above the best one a cool run descends for long, so the second start
// keeps FastSA's own temperature (the same bench: joint_10000, from rotor's plan).
ParamMap warm_start_settings(std::string_view member) {
  if (member == "fastsa") return {{"initial_temperature_pct", "0.003"}};
  return {};
}

// The anytime rounds' MILP and its share of the work left after the finisher's runs: most of it,
// the FastSA rounds after it the rest (bench/auto_speed_bench.py --curve measures the rounds
// against each member alone).
constexpr std::string_view kAnytimeMilp = "checkmate";
constexpr double kAnytimeMilpShare = 0.6;

// Where the cheapest other member's plan that fits the budget costs at most this many times the
// default schedule's cost, FastSA's warm runs from it come before its cold run (cold_run_deferred);
// from a dearer start (mincut's, recomputing most of the graph: ResNet-18 at 70 %) the cold run's
// plan was the cheaper, and it runs first.
constexpr double kColdRunStartCost = 2.0;

// fitting_starts: the second warm start costs at most this many times the first.
constexpr double kSecondStartCostRatio = 1.05;

// When nothing fits, the searches for a lower peak after FastSA's cold run (a two-pass plan, a
// second cold run) are skipped where they cannot pay: the best plan's peak is within
// this fraction of the default schedule's peak above the memory lower bound (no plan is lower by
// more; a budget of `min` on a model whose parameters and gradients set the bound: llama-13b in
// bench/scale_bench.py), ...
constexpr double kNegligiblePeakGap = 0.002;
// ... or, for the second cold run, the first's peak is above the best plan's (another member's or
// the two-pass plan's) by more than this fraction of the default schedule's peak: another run
// moves FastSA's peak by far less there (bench/scale_bench.py's `min` rows: a few tenths of a
// point, against gaps of 2 to 10 points; the second run's plans are unchanged there with FastSA's
// own settings).
constexpr double kRestartReach = 0.01;

// ... or, for either, the cold run took at least this many work units: the second run takes two
// to three times as long as the first (FastSA's own windows are four to ten times the quick
// ones), which would put `auto` well past the planning-speed bar on the random layered
// graphs of 1,000 and 10,000 nodes at 50 %, and where the cold run takes this long its memory pass
// has run many windows or its whole schedule: the two runs' peaks then differ by the chance of
// the walk, either way (bench/auto_speed_bench.py --fastsa-alone; docs/solvers/auto.md).
constexpr double kSecondColdRunMaxWork = 1.75;

// When nothing fits, the polish of FastSA's own lowest-peak plan (at its own peak) may use at most
// this share of the work the runs before it took: on large graphs it removes recomputation for as
// long as it is given (random layered graph of 10,000 nodes at 50 %: the rest of the work limit),
// while the planning-speed bar compares peaks first where nothing fits. From another member's
// plan (mincut's at a budget of `min`, recomputing most of the graph) the polish is what makes
// the plan affordable, and converges: it has no cap (bench/scale_bench.py's `min` rows).
constexpr double kPolishShareOfWork = 0.2;

// For a warm run's outcome line: the settings auto gave it that took effect (the user's
// parameters come first), as ", key=value" each.
std::string settings_text(const ParamMap& settings, const ParamMap& params) {
  std::string out;
  for (const auto& [key, value] : settings) {
    const auto it = params.find(key);
    if (it != params.end() && it->second == value) out += fmt::format(", {}={}", key, value);
  }
  return out;
}

// (within budget, cheapest) before (over budget, lowest peak); ties keep the earlier member.
bool better(const Evaluation& a, const Evaluation& b, int64_t budget) {
  return better_plan({a.peak_bytes, a.cost}, {b.peak_bytes, b.cost}, budget);
}

// Work units of the work left that a member may use: its row's share (a member's slice; the
// finisher, last, the rest), at most its row's max_work.
double work_slice(const SolverEntry& member, double left) {
  if (member.portfolio.role == PortfolioRole::kFinisher) return left;
  return std::min(member.portfolio.share * left, member.portfolio.max_work);
}

// The baseline rows that `members` does not list: they run first whatever the user listed.
std::vector<std::string> unlisted_baselines(std::span<const SolverEntry* const> rows,
                                            const std::vector<std::string>& members) {
  std::vector<std::string> out;
  for (const SolverEntry* row : rows)
    if (row->portfolio.role == PortfolioRole::kBaseline &&
        std::find(members.begin(), members.end(), row->name) == members.end())
      out.emplace_back(row->name);
  return out;
}

class Portfolio {
 public:
  Portfolio(const Graph& g, const SolveOptions& options, const AutoParams& params,
            const SolverDirectory& others, std::span<const SolverEntry* const> rows)
      : others_(others),
        rows_(rows),
        g_(g),
        options_(options),
        params_(params),
        limits_(options.work_limit, options.time_limit_s),
        baseline_(baseline(g)) {}

  Plan run() {
    const double cost_floor = cost_lower_bound(g_);
    for (const std::string& name : params_.members) {
      const SolverEntry& member = *find_member(rows_, name);
      if (best_ && best_->eval.peak_bytes <= options_.budget.bytes &&
          best_->eval.cost <= cost_floor) {
        skip(name, "skipped: the best plan already has the least possible cost");
        continue;
      }
      if (const std::optional<std::string> why = not_applicable(member)) {
        skip(name, *why);
        continue;
      }
      if (member.portfolio.when_nothing_fits && best_ && fits(*best_)) {
        skip(name, "skipped: a plan before it fits the budget");
        continue;
      }
      if (member.portfolio.role != PortfolioRole::kFinisher) {
        run_member(member, name, 1.0, {});
        continue;
      }
      run_finisher(member, cost_floor);
      if (anytime()) improve(member, cost_floor);
    }
    REMAT_CHECK(best_.has_value(), "auto: no member ran");
    Plan plan = std::move(best_->plan);
    SolveStats& stats = plan.stats;
    // The portfolio's plan depends on the clock as soon as one member's did, or the time limit
    // skipped or cut short a member; it stopped on work when a member did or the work ran out.
    stats.stop_reason = stopped_;
    stats.stopped(limits_.reason());
    stats.work = limits_.spent();
    stats.counters.insert(stats.counters.begin(), counters_.begin(), counters_.end());
    stats.lists.emplace_back("auto_members", std::move(outcomes_));
    stats.lists.emplace_back("auto_winner", std::vector<std::string>{best_name_});
    stats.series.insert(stats.series.end(), best_series_.begin(), best_series_.end());
    if (lower_bound_) stats.cost_lower_bound = *lower_bound_;
    return plan;
  }

 private:
  std::optional<std::string> not_applicable(const SolverEntry& member) const {
    if (const std::optional<std::string> why = remat::not_applicable(member, g_))
      return "not applicable: " + *why;
    const int64_t cap = member.portfolio.max_nodes;
    if (cap > 0 && g_.num_nodes() > params_.max_nodes.value_or(cap))
      return fmt::format("not applicable: {} nodes > checkmate_max_nodes = {}", g_.num_nodes(),
                         params_.max_nodes.value_or(cap));
    return limit_reached();
  }

  // Why no further run starts, if a limit says so.
  std::optional<std::string> limit_reached() const {
    if (limits_.expired()) return "skipped: the time limit was reached";
    if (limits_.out_of_work()) return "skipped: the work limit was reached";
    return std::nullopt;
  }

  void skip(std::string_view member, std::string_view why) {
    outcomes_.push_back(fmt::format("{}: {}", member, why));
  }

  struct WarmStart {
    Sequence sequence;
    std::string from;  // the member that found it
    Budget budget;     // the budget of this run: the user's, or the start's own peak (polish)
  };

  // For the outcome lines: a peak as % of the default schedule's.
  double percent_of_baseline_peak(int64_t peak_bytes) const {
    return 100.0 * static_cast<double>(peak_bytes) /
           static_cast<double>(std::max<int64_t>(1, baseline_.peak_bytes));
  }

  double cost_increase_percent(double cost) const {
    return 100.0 * (cost - baseline_.cost) / std::max(1e-300, baseline_.cost);
  }

  bool fits(const SolveResult& r) const { return r.eval.peak_bytes <= options_.budget.bytes; }

  // The finisher (FastSA), last, with the time left. Cold (its own grouped stage 1) first, unless
  // another member's plan fits the budget cheaply (cold_run_deferred); then:
  //  - when other members' plans fit the budget (not the default schedule), warm from the
  //    cheapest (with warm_start_settings) and then from the second cheapest of another member:
  //    stage 2 from that plan; the cold run follows them where it was deferred, unless it cannot
  //    pay (cold_run_cannot_pay).
  //    Neither cold nor warm always wins, nor does the cheaper start (bench/models_bench.py
  //    prints every member's plan beside auto's).
  //    Over the budget FastSA never starts from another solver's plan: grouped stage 1 reaches
  //    lower peaks than single-node moves from it.
  //  - when no member's plan fits but the cold run's does, a warm run from it (refine).
  //  - when nothing fits after the cold run, a plan in two passes (run_two_pass, unless
  //    two_pass=false; first, since where it fits a second cold run cannot change the plan:
  //    bench/auto_speed_bench.py, ResNet-18 at 50 %),
  //  - when still nothing fits, a second cold run: where the quick settings changed the first, one
  //    with FastSA's own settings (run_own_settings: the quick window can stop the annealing far
  //    above the peak FastSA alone reaches, the same bench --fastsa-alone on random layered graphs
  //    at 50 %); else a restart with another seed: the annealing is a random search and one
  //    chain may miss what another finds (docs/solvers/auto.md). When its plan fits, a warm run
  //    from it (refine).
  //  - and then a polish of the lowest-peak plan (below).
  // Runs usually stop on convergence, so the shares are caps.
  void run_finisher(const SolverEntry& finisher, double cost_floor) {
    REMAT_CHECK(best_.has_value(), "auto: the default schedule runs before the finisher");
    const std::string name(finisher.name);
    std::vector<WarmStart> starts = fitting_starts();
    const bool nothing_fits = !fits(*best_);
    // Nothing fits: the cold run is the likeliest to fit, so it gets the larger share (random
    // layered graphs of thousands of nodes at 70 % spend half the work in FastSA's memory pass).
    // By default the cold run has the quick settings too: with FastSA's own window it often runs
    // its whole schedule, most of the portfolio's time, for a plan that the warm runs mostly
    // match. So the default `auto` is not always as good as FastSA alone at its defaults
    // (bench/auto_speed_bench.py --fastsa-alone measures the two side by side). Given more work
    // (anytime), a cold run with FastSA's own settings opens the rounds (improve).
    if (!starts.empty()) {
      const bool deferred = cold_run_deferred();
      if (!deferred) run_member(finisher, name, 0.5, {});
      if (!finished(cost_floor)) {
        run_warm(finisher, name + "_warm", starts.size() > 1 ? 0.5 : 1.0, starts[0]);
        if (starts.size() > 1 && !finished(cost_floor))
          run_member(finisher, name + "_warm_2", 1.0, starts[1]);
      }
      if (deferred) run_deferred_cold(finisher, starts[0], cost_floor);
      return;
    }
    run_member(finisher, name, nothing_fits ? 0.75 : 1.0, {});
    if (finished(cost_floor)) return;
    if (fits(*best_)) {
      refine(finisher, cost_floor);
      return;
    }
    if (params_.two_pass) {
      const std::string label = name + "_two_pass";
      if (const std::optional<std::string> why = near_memory_floor()) {
        skip(label, *why);
      } else {
        run_two_pass(finisher, label);
        two_pass_fits_ = best_name_ == label && fits(*best_);
        if (finished(cost_floor) || fits(*best_)) return;
      }
    }
    const bool quick_changed_cold_run = quick_changed(finisher);
    const std::string second = name + (quick_changed_cold_run ? "_own_settings" : "_restart");
    if (const std::optional<std::string> why = second_cold_run_cannot_pay(name)) {
      skip(second, *why);
    } else {
      if (quick_changed_cold_run)
        run_own_settings(finisher, 0.6);
      else
        run_member(finisher, second, 0.6, {}, derive_seed(options_.seed, 1));
      if (finished(cost_floor)) return;
      if (fits(*best_)) {
        refine(finisher, cost_floor);
        return;
      }
    }
    // Nothing fits: the plan returned is the lowest peak found, whatever its cost (mincut's
    // memory objective reaches low peaks by recomputing nearly everything). FastSA's stage 2 from
    // that plan, with its peak as the budget, removes recomputation without raising the peak.
    polish(finisher);
  }

  // The polish of the lowest-peak plan at its own peak. From another member's plan (mincut's
  // recomputes most of the graph) it starts as cool as a warm run: FastSA's own temperature
  // wanders for long before it descends, for a plan within a point of CI of the cool run's
  // (bench/scale_bench.py's `min` rows). From FastSA's own plan it keeps FastSA's temperature: a
  // cool start keeps more of that plan's recomputation (bench/auto_speed_bench.py: random layered
  // graphs at 50 %, where only FastSA's plans come near the budget).
  void polish(const SolverEntry& finisher) {
    const std::string label = std::string(finisher.name) + "_polish";
    const WarmStart start{best_->plan.sequence, best_name_, Budget{best_->eval.peak_bytes}};
    if (!best_by_finisher_) {
      run_warm(finisher, label, 1.0, start);
      return;
    }
    const double left = limits_.left();
    run_member(finisher, label,
               left > 0 ? std::min(1.0, kPolishShareOfWork * limits_.spent() / left) : 1.0, start);
  }

  // Whether FastSA's cold run comes after its warm runs from the cheapest other member's plan
  // that fits the budget (fitting_starts' first): where that plan costs at most
  // kColdRunStartCost times the default schedule's cost. The warm runs usually reach the cold run's
  // plan or a cheaper one from there for less work (bench/auto_speed_bench.py's graphs and
  // bench/models_bench.py's models at 50 % and 70 %), so the cold run only runs where they end dear
  // (cold_run_cannot_pay).
  bool cold_run_deferred() const {
    const auto cheapest =
        std::min_element(fitting_.begin(), fitting_.end(),
                         [](const Fitting& a, const Fitting& b) { return a.cost < b.cost; });
    return cheapest != fitting_.end() && cheapest->cost <= kColdRunStartCost * baseline_.cost;
  }

  // FastSA's cold run after its warm runs from `start` (cold_run_deferred), unless it cannot pay;
  // a line either way.
  void run_deferred_cold(const SolverEntry& finisher, const WarmStart& start, double cost_floor) {
    const std::string name(finisher.name);
    if (const std::optional<std::string> why = cold_run_cannot_pay(start, cost_floor))
      skip(name, *why);
    else
      run_member(finisher, name, 1.0, {});
  }

  // Why the deferred cold run cannot pay, if it cannot: a limit was reached, or the best plan
  // costs at most cold_run_gain_points of CI above the least possible cost `cost_floor`.
  std::optional<std::string> cold_run_cannot_pay(const WarmStart& start, double cost_floor) const {
    if (std::optional<std::string> why = limit_reached()) return why;
    const double gap = cost_increase_percent(best_->eval.cost) - cost_increase_percent(cost_floor);
    if (gap > params_.cold_run_gain_points) return std::nullopt;
    return fmt::format(
        "skipped: after the warm runs from {}'s plan the best plan ({}'s) costs CI {:+.2f}%, "
        "within {:g} point of the least possible cost (CI {:+.2f}%)",
        start.from, best_name_, cost_increase_percent(best_->eval.cost),
        params_.cold_run_gain_points, cost_increase_percent(cost_floor));
  }

  // Why a search for a lower peak cannot pay, if it cannot: the best plan's peak is within
  // kNegligiblePeakGap of the memory lower bound (nullopt otherwise).
  std::optional<std::string> near_memory_floor() const {
    const double gap = static_cast<double>(best_->eval.peak_bytes - memory_lower_bound(g_));
    if (gap > kNegligiblePeakGap * static_cast<double>(baseline_.peak_bytes)) return std::nullopt;
    return fmt::format(
        "skipped: the best plan's peak ({}) is {:.2f}% of the default schedule's peak above the "
        "memory lower bound",
        best_name_, 100.0 * gap / static_cast<double>(std::max<int64_t>(1, baseline_.peak_bytes)));
  }

  // Why FastSA's second cold run (nothing fits after its cold run `cold`, nor the two-pass plan)
  // cannot pay, if it cannot: the best plan is near the memory floor (near_memory_floor), the
  // cold run took kSecondColdRunMaxWork or more, or another plan's peak (another member's, the
  // two-pass plan's) is below the cold run's by more than kRestartReach of the default schedule's
  // peak.
  std::optional<std::string> second_cold_run_cannot_pay(const std::string& cold) const {
    if (std::optional<std::string> why = near_memory_floor()) return why;
    if (const std::optional<double> work = counter(cold + "_work");
        work && *work >= kSecondColdRunMaxWork)
      return fmt::format(
          "skipped: the cold run took {:.3f} units (at least {:g}); a second run would take two "
          "to three times as long",
          *work, kSecondColdRunMaxWork);
    const std::optional<double> cold_peak = counter(cold + "_peak_bytes");
    if (!cold_peak || best_name_ == cold) return std::nullopt;
    const double gap = *cold_peak - static_cast<double>(best_->eval.peak_bytes);
    if (gap <= kRestartReach * static_cast<double>(baseline_.peak_bytes)) return std::nullopt;
    return fmt::format(
        "skipped: the cold run's peak is {:.1f} points of the default schedule's peak above the "
        "best plan's ({}); another FastSA run moves it by less",
        100.0 * gap / static_cast<double>(std::max<int64_t>(1, baseline_.peak_bytes)), best_name_);
  }

  // The last value of counter `name`, if recorded.
  std::optional<double> counter(const std::string& name) const {
    for (auto it = counters_.rbegin(); it != counters_.rend(); ++it)
      if (it->first == name) return it->second;
    return std::nullopt;
  }

  // A run of the finisher from `start`, a plan within the budget, with warm_start_settings.
  void run_warm(const SolverEntry& finisher, const std::string& label, double share,
                const WarmStart& start) {
    run_member(finisher, label, share, start, {}, warm_start_settings(finisher.name));
  }

  // Only FastSA's own plan (its cold run's or restart's) fits: a warm run from it with the rest of
  // the slice (fastsa_refine). Its quick window often ends the cold run's stage 2 in a plan that a
  // re-anneal near it still improves (bench/auto_speed_bench.py --curve: ResNet-18 at 60 %).
  void refine(const SolverEntry& finisher, double cost_floor) {
    if (finished(cost_floor)) return;
    run_warm(finisher, std::string(finisher.name) + "_refine", 1.0,
             WarmStart{best_->plan.sequence, best_name_, options_.budget});
  }

  bool anytime() const {
    return params_.anytime == Anytime::kOn ||
           (params_.anytime == Anytime::kAuto && options_.work_limit > kDefaultWorkLimit);
  }

  // Time given is time used: with a work limit above the default (or anytime=true), the work
  // the finisher's runs left goes to further FastSA runs, each with half of the work left and a
  // seed of its own, until the work runs out (a round below a hundredth of the limit cannot
  // finish a stage on a large graph) or the best plan has the least possible cost. Within
  // budget, each round anneals the best plan again from a hot start (stage 2 from it); over it,
  // a cold run (its grouped stage 1 reaches lower peaks than moves from a plan) alternates with
  // a polish of the best plan at its own peak. Where only a two-pass plan fits, every other round
  // plans the two passes again instead, with the round's seed and the quick settings (more
  // tries): the first pass decides most of their cost, and a restart from the best plan cannot
  // change its first pass much (counter fastsa_improve_two_pass_rounds). The rounds run on work,
  // so the plan is the same for the same work limit and seed on any machine.
  void improve(const SolverEntry& finisher, double cost_floor) {
    rounds_ = true;
    if (!finished(cost_floor)) run_own_settings(finisher, 0.5);
    run_anytime_milp(cost_floor);
    const std::string name = std::string(finisher.name) + "_improve";
    const double smallest_round = options_.work_limit / 100;
    const double work_before = limits_.spent();
    own_settings_ = true;  // each round may take longer to converge
    int rounds = 0, improved = 0, two_pass_rounds = 0;
    while (!finished(cost_floor) && limits_.left() / 2 >= smallest_round) {
      ++rounds;
      const std::string label = fmt::format("{}_{}", name, rounds);
      const uint64_t seed = derive_seed(options_.seed, 100 + static_cast<uint64_t>(rounds));
      const size_t outcomes = outcomes_.size(), counters = counters_.size();
      const std::string best_before = best_name_;
      if (two_pass_fits_ && rounds % 2 == 1) {
        own_settings_ = false;
        run_two_pass(finisher, label, seed);
        own_settings_ = true;
        ++two_pass_rounds;
      } else if (fits(*best_))
        run_member(finisher, label, 0.5,
                   WarmStart{best_->plan.sequence, best_name_, options_.budget}, seed);
      else if (rounds % 2 == 1)
        run_member(finisher, label, 0.5, {}, seed);
      else
        run_member(finisher, label, 0.5,
                   WarmStart{best_->plan.sequence, best_name_, Budget{best_->eval.peak_bytes}},
                   seed);
      // Only the rounds that found a better plan keep their lines (small graphs run hundreds).
      if (best_name_ == best_before) {
        outcomes_.resize(outcomes);
        counters_.resize(counters);
      } else {
        ++improved;
      }
    }
    skip(name, fmt::format("{} rounds, {} found a better plan, {:.3f} units", rounds, improved,
                           limits_.spent() - work_before));
    if (two_pass_fits_) counters_.emplace_back(name + "_two_pass_rounds", two_pass_rounds);
  }

  // Whether the quick settings changed FastSA's cold run (quick_settings).
  bool quick_changed(const SolverEntry& finisher) const {
    const ParamMap& own = params_of(finisher);
    return params_.quick && quick_settings(finisher.name, g_, own) != own;
  }

  // A cold run with FastSA's own settings and the run's seed (fastsa_own_settings), with `share`
  // of the work left, so that `auto`'s plan is no worse than FastSA's alone at its defaults:
  // where the quick settings changed the cold run and nothing fits after it or the two-pass plan
  // (run_finisher; it takes the restart's place), or else as the first anytime round. Once per
  // solve.
  void run_own_settings(const SolverEntry& finisher, double share) {
    if (own_settings_ran_ || !quick_changed(finisher)) return;
    own_settings_ran_ = true;
    own_settings_ = true;
    run_member(finisher, std::string(finisher.name) + "_own_settings", share, {});
    own_settings_ = false;
  }

  // The anytime rounds' MILP: on graphs of at most anytime_checkmate_max_nodes nodes, checkmate
  // (when listed) with kAnytimeMilpShare of the work left, started from the best plan. CBC's
  // branch and bound keeps improving and bounding an incumbent where FastSA's restarts from the
  // same plan stall; its work is its simplex iterations, so the rounds stay deterministic. Its
  // model keeps one order of first computations, and neither order wins everywhere: when the best
  // plan reorders (FastSA's usually do), half of that work goes to the model over the best plan's
  // order (`order=start`: the plan is its MIP start), the rest to the model over the default order
  // (`order=default`, from checkmate's own warm start). Its bounds hold over one order's plans
  // only (run_member), so they do not end the rounds.
  void run_anytime_milp(double cost_floor) {
    const SolverEntry* milp = find_member(rows_, kAnytimeMilp);
    if (milp == nullptr || finished(cost_floor) ||
        std::find(params_.members.begin(), params_.members.end(), kAnytimeMilp) ==
            params_.members.end())
      return;
    const std::string label = std::string(kAnytimeMilp) + "_anytime";
    if (g_.num_nodes() > params_.anytime_milp_max_nodes) {
      skip(label, fmt::format("not applicable: {} nodes > anytime_checkmate_max_nodes = {}",
                              g_.num_nodes(), params_.anytime_milp_max_nodes));
      return;
    }
    if (const std::optional<std::string> why = remat::not_applicable(*milp, g_)) {
      skip(label, "not applicable: " + *why);
      return;
    }
    const double work = kAnytimeMilpShare * limits_.left(), spent_before = limits_.spent();
    whole_slice_ = true;
    if (first_run_reordering(g_, best_->plan.sequence)) {
      run_member(*milp, label + "_start_order", work / 2 / limits_.left(),
                 WarmStart{best_->plan.sequence, best_name_, options_.budget}, {},
                 {{"order", "start"}});
    }
    const double left = limits_.left();
    if (!finished(cost_floor) && left > 0)
      run_member(*milp, label, std::min(1.0, (work - (limits_.spent() - spent_before)) / left),
                 WarmStart{best_->plan.sequence, best_name_, options_.budget}, {},
                 {{"order", "default"}});
    whole_slice_ = false;
  }

  // Each new best plan, at the work spent when it was found (series auto_best_*), and to the
  // caller's progress callback (stage `auto: best plan from <label>`): the best plan over time.
  void record_best() {
    best_series_[0].second.push_back(limits_.spent());
    best_series_[1].second.push_back(percent_of_baseline_peak(best_->eval.peak_bytes));
    best_series_[2].second.push_back(cost_increase_percent(best_->eval.cost));
    if (!options_.on_progress) return;
    const std::string stage = "auto: best plan from " + best_name_;
    options_.on_progress(
        {.stage = stage, .best_peak_bytes = best_->eval.peak_bytes, .best_cost = best_->eval.cost});
  }

  // Nothing fits after FastSA's cold run. Where the graph outputs made early (a
  // training graph's weight gradients) fill the memory that later steps need, a plan that makes
  // them in a second pass may fit (two_pass.h; bench/auto_speed_bench.py's ResNet-18 at 50 %).
  // FastSA plans the first pass on the graph without them (solve_first_pass), and then runs on
  // the whole graph from that plan followed by the second pass; `seed`, when given (an anytime
  // round), is both runs' seed and the first pass's only one.
  void run_two_pass(const SolverEntry& finisher, const std::string& label,
                    std::optional<uint64_t> seed = {}) {
    if (!deferred_) deferred_ = defer_outputs(g_, options_.budget.bytes);
    const std::optional<DeferredOutputs>& d = *deferred_;
    if (!d) {
      const double floor = static_cast<double>(estimate_first_pass_floor(g_, {}));
      skip(label, floor <= static_cast<double>(options_.budget.bytes)
                      ? "not applicable: the graph outputs made in the default order leave room "
                        "for every step"
                      : "not applicable: deferring every output that can wait still leaves a "
                        "step over budget");
      return;
    }
    // The finisher's first pass tries kFirstPassTries seeds (the run's, then derive_seed(seed,
    // 2), 3, ...): its cost varies with the seed more than any later run can make up
    // (bench/auto_speed_bench.py); each anytime round tries its own, once on each first-pass
    // graph (solve_first_pass alternates them).
    std::vector<uint64_t> seeds = {seed.value_or(options_.seed)};
    if (seed) seeds.push_back(*seed);
    for (uint64_t i = 2; !seed && i <= kFirstPassTries; ++i)
      seeds.push_back(derive_seed(options_.seed, i));
    const SolveResult first = solve_first_pass(finisher, label, *d, seeds);
    counters_.emplace_back(label + "_deferred_outputs", static_cast<double>(d->deferred.size()));
    counters_.emplace_back(label + "_kept_values", static_cast<double>(d->kept.size()));
    counters_.emplace_back(label + "_first_pass_seconds", first.plan.stats.wall_time_s);
    const double first_peak = percent_of_baseline_peak(first.eval.peak_bytes);
    if (!fits(first)) {
      skip(label, fmt::format("first pass over budget: peak {:.1f}% with {} outputs deferred, "
                              "{:.3f} s",
                              first_peak, d->deferred.size(), first.plan.stats.wall_time_s));
      return;
    }
    run_member(finisher, label, 0.5,
               WarmStart{drop_second_pass_reruns(g_, two_pass_sequence(g_, *d, first.plan.sequence),
                                                 first.plan.sequence.size(), options_.budget.bytes),
                         fmt::format("two passes: {} outputs deferred, {} values kept, first pass "
                                     "{:.1f}% in {:.3f} s",
                                     d->deferred.size(), d->kept.size(), first_peak,
                                     first.plan.stats.wall_time_s),
                         options_.budget},
               seed);
  }

  // A two-pass plan's first pass: `finisher` with first_pass_settings, once with each seed of
  // `seeds` (each run half of the work left; after two, only while every run has converged within
  // its share: with less work, more tries find worse plans), on d.first_pass and
  // d.first_pass_pinned in turn (the pinned graph's runs settle in the cheapest plans more often,
  // but where the budget needs a dear node twice, or the work is short, they find nothing within
  // it), the best plan kept; when that is over the budget, once more on d.first_pass with the
  // settings of its other runs. Its wall time sums the runs; counter `<label>_first_pass_tries`
  // counts those with first_pass_settings.
  SolveResult solve_first_pass(const SolverEntry& finisher, const std::string& label,
                               const DeferredOutputs& d, std::span<const uint64_t> seeds) {
    std::optional<SolveResult> best;
    double seconds = 0;
    auto keep = [&](SolveResult r) {
      seconds += r.plan.stats.wall_time_s;
      if (!best || better(r.eval, best->eval, options_.budget.bytes)) best = std::move(r);
    };
    bool tuned = false;  // first_pass_settings changed something
    const ParamMap& given = params_of(finisher);
    const bool quick_window = params_.quick && !own_settings_ && !given.contains("schedule") &&
                              !given.contains("convergence_window");
    int tries = 0;
    bool cut_short = false;  // a try ended on its work share, not on convergence
    for (uint64_t seed : seeds) {
      if ((best && limits_.stop()) || (tries >= 2 && cut_short)) break;
      SolveOptions o = member_options(finisher, 0.5, seed);
      const ParamMap usual = o.params;
      o.params = first_pass_settings(finisher.name, g_, usual, quick_window);
      tuned = o.params != usual;
      SolveResult r = solve_part(tries % 2 == 1 ? d.first_pass_pinned : d.first_pass, finisher, o);
      cut_short = cut_short || r.plan.stats.stop_reason != StopReason::kConverged;
      keep(std::move(r));
      ++tries;
    }
    counters_.emplace_back(label + "_first_pass_tries", tries);
    if (!fits(*best) && tuned && !limits_.stop())
      keep(solve_part(d.first_pass, finisher, member_options(finisher, 0.5, seeds.front())));
    best->plan.stats.wall_time_s = seconds;
    return std::move(*best);
  }

  // A run of `member` on `g` (the user's graph, or a first pass), its work and stop reason counted
  // as the portfolio's.
  SolveResult solve_part(const Graph& g, const SolverEntry& member, const SolveOptions& o) {
    SolveResult r = others_.solve(g, member.name, o);
    limits_.spend(r.plan.stats.work);
    stopped_ = std::max(stopped_, r.plan.stats.stop_reason);
    return r;
  }

  // The plans of the members that fit the budget (the default schedule aside), the cheapest
  // first, at most two; the second only when it costs at most kSecondStartCostRatio times the
  // first. A run from a dearer second start (rotor's plan beside rockmate's, typically) did not
  // come back below the run from the first on any graph of bench/auto_speed_bench.py or the
  // Hugging Face block graphs at 50 % and 70 % (its start 8 % to 36 % dearer), while it took up to
  // a fifth of the portfolio's work; from a start within a few percent it sometimes won
  // (MobileNet-V2 at 50 %). A plan that recomputes most of the graph (mincut's often does) also
  // makes every FastSA move as many times dearer (its sequence is that much longer).
  std::vector<WarmStart> fitting_starts() const {
    std::vector<const Fitting*> order;
    for (const Fitting& f : fitting_) order.push_back(&f);
    std::stable_sort(order.begin(), order.end(),
                     [](const Fitting* a, const Fitting* b) { return a->cost < b->cost; });
    std::vector<WarmStart> starts;
    for (const Fitting* f : order)
      if (starts.size() < 2 && f->cost <= kSecondStartCostRatio * order.front()->cost)
        starts.push_back(WarmStart{f->sequence, f->member, options_.budget});
    return starts;
  }

  bool finished(double cost_floor) const {
    return limits_.stop() || (fits(*best_) && best_->eval.cost <= cost_floor);
  }

  // The options of a run of `member`: the user's budget, seed (or `seed`), threads, progress and
  // cache, `share` of the member's slice of the work left and the same share of the seconds left,
  // and the parameters given to it.
  SolveOptions member_options(const SolverEntry& member, double share,
                              std::optional<uint64_t> seed = {}) const {
    const double left = limits_.left();
    const double slice = whole_slice_ ? left : work_slice(member, slice_base(member));
    const double fraction = left > 0 ? std::min(slice * share, left) / left : 0;
    SolveOptions o = part_options(options_, limits_, fraction);
    o.seed = seed.value_or(options_.seed);
    o.params = params_of(member);
    if (params_.quick && !own_settings_) o.params = quick_settings(member.name, g_, o.params);
    return o;
  }

  // The work `member`'s slice is a share of: the work left, except in an anytime run before its
  // rounds, where it is what the default work limit would have left (the finisher's: the less of
  // the two), each run capped by the work left. So with a larger limit those runs are the
  // default's and the plan is no worse than the default's; with a smaller one, the members before
  // the finisher still get the default's slices (rockmate's grid cut to a share of a 20-unit limit
  // missed the default's plan: bench/auto_speed_bench.py --search 20, joint_10000).
  double slice_base(const SolverEntry& member) const {
    const double left = limits_.left();
    if (rounds_ || !anytime()) return left;
    const double default_left = std::max(0.0, kDefaultWorkLimit - limits_.spent());
    return member.portfolio.role == PortfolioRole::kFinisher ? std::min(left, default_left)
                                                             : default_left;
  }

  // Whether the user gave `member` parameters (its errors are then theirs to fix).
  bool given_params(const SolverEntry& member) const {
    return params_.member_params.contains(std::string(member.name));
  }

  // The parameters the user gave `member` (MEMBER.KEY=VALUE); empty when none.
  const ParamMap& params_of(const SolverEntry& member) const {
    static const ParamMap kNone;
    const auto it = params_.member_params.find(std::string(member.name));
    return it == params_.member_params.end() ? kNone : it->second;
  }

  // Runs `member` through the judged solve(), recording it as `label`, with `share` of its slice,
  // from `warm` when given, with `seed` instead of the user's when given, with `settings` where
  // the user's parameters for it do not name them.
  void run_member(const SolverEntry& member, const std::string& label, double share,
                  const std::optional<WarmStart>& warm, std::optional<uint64_t> seed = {},
                  const ParamMap& settings = {}) {
    SolveOptions o = member_options(member, share, seed);
    for (const auto& [key, value] : settings) o.params.try_emplace(key, value);
    if (warm) {
      o.start = warm->sequence;
      o.budget = warm->budget;
    }
    SolveResult r;
    try {
      r = solve_part(g_, member, o);
    } catch (const InputError& e) {
      // With parameters the user gave this member, its error is most likely theirs to fix.
      if (given_params(member)) throw;
      skip(label, fmt::format("not applicable: {}", e.what()));
      return;
    }
    // A polish ran at its start's peak: its status is the user's budget's.
    if (warm && warm->budget.bytes != options_.budget.bytes)
      r.plan.stats.status = fits(r) ? SolveStatus::kFeasible : SolveStatus::kOverBudget;
    outcomes_.push_back(fmt::format(
        "{}: {}, peak {:.1f}%, CI {:+.2f}%, {:.3f} units, {:.3f} s{}", label,
        to_string(r.plan.stats.status), percent_of_baseline_peak(r.eval.peak_bytes),
        cost_increase_percent(r.eval.cost), r.plan.stats.work, r.plan.stats.wall_time_s,
        warm ? fmt::format(" (started from {}{}{})", warm->from,
                           warm->budget.bytes == options_.budget.bytes ? "" : ", at its peak",
                           settings_text(settings, o.params))
             : ""));
    counters_.emplace_back(label + "_peak_bytes", static_cast<double>(r.eval.peak_bytes));
    counters_.emplace_back(label + "_cost", r.eval.cost);
    counters_.emplace_back(label + "_seconds", r.plan.stats.wall_time_s);
    counters_.emplace_back(label + "_work", r.plan.stats.work);
    // A fixed-order member's bound and proof hold only over its class of plans (FastSA may
    // reorder below them), so they are not the portfolio's.
    if (member.keeps_default_order) {
      if (r.plan.stats.status == SolveStatus::kOptimal)
        r.plan.stats.status = SolveStatus::kFeasible;
      if (r.plan.stats.cost_lower_bound)
        counters_.emplace_back(label + "_fixed_order_cost_lower_bound",
                               *r.plan.stats.cost_lower_bound);
    } else if (r.plan.stats.cost_lower_bound) {
      lower_bound_ = std::max(lower_bound_.value_or(0), *r.plan.stats.cost_lower_bound);
    }
    if (member.portfolio.role == PortfolioRole::kMember && fits(r))
      fitting_.push_back(Fitting{label, r.plan.sequence, r.eval.cost});
    if (!best_ || better(r.eval, best_->eval, options_.budget.bytes)) {
      best_ = std::move(r);
      best_name_ = label;
      best_by_finisher_ = member.portfolio.role == PortfolioRole::kFinisher;
      record_best();
    }
  }

  struct Fitting {
    std::string member;
    Sequence sequence;
    double cost = 0;
  };

  const SolverDirectory& others_;
  std::span<const SolverEntry* const> rows_;  // the portfolio's
  const Graph& g_;
  const SolveOptions& options_;
  const AutoParams& params_;
  Limits limits_;
  const Baseline baseline_;  // the default schedule's figures, for the outcome lines
  std::optional<SolveResult> best_;
  std::string best_name_;
  bool best_by_finisher_ = false;  // the best plan is one of FastSA's runs' (not another member's)
  std::vector<Fitting> fitting_;   // plans of the members (kMember) within budget
  std::optional<double> lower_bound_;
  StopReason stopped_ = StopReason::kConverged;  // the members' stop reasons, the worst
  bool own_settings_ = false;  // the run ahead: no quick_settings (anytime: cold run, rounds)
  bool whole_slice_ = false;   // the run ahead: its share is of all the work left (anytime MILP)
  bool rounds_ = false;        // the anytime rounds have begun (improve)
  bool own_settings_ran_ = false;  // run_own_settings ran
  // defer_outputs for the user's budget, once asked (run_two_pass).
  std::optional<std::optional<DeferredOutputs>> deferred_;
  bool two_pass_fits_ = false;  // the finisher's two-pass plan fits: the rounds plan it again
  std::vector<std::string> outcomes_;
  std::vector<std::pair<std::string, double>> counters_;
  std::vector<std::pair<std::string, std::vector<double>>> best_series_ = {
      {"auto_best_work", {}}, {"auto_best_peak_percent", {}}, {"auto_best_ci_percent", {}}};
};

class AutoSolver final : public Solver {
 public:
  explicit AutoSolver(const SolverDirectory& others) : others_(others) {}

  Plan solve(const Graph& graph, const SolveOptions& options) override {
    const std::vector<const SolverEntry*> rows = portfolio_rows(others_);
    AutoParams params = parse_auto_params(options.params, rows);
    // The default schedule always runs first: `auto` is never worse than it.
    const std::vector<std::string> first = unlisted_baselines(rows, params.members);
    params.members.insert(params.members.begin(), first.begin(), first.end());
    Portfolio portfolio(graph, options, params, others_, rows);
    return portfolio.run();
  }

  // On a chain: the members whose rows accept chains, in order, each through the judged solve
  // with an even share of the work and time left; the best plan by better_plan wins. The default
  // schedule (none: store-all) runs first, so `auto` is never worse than it.
  ChainPlan solve_chain(const Chain& chain, const SolveOptions& options) override {
    const std::vector<const SolverEntry*> rows = portfolio_rows(others_);
    const AutoParams params = parse_auto_params(options.params, rows);
    std::vector<std::string> members;
    for (const SolverEntry* row : rows)
      if (row->portfolio.role == PortfolioRole::kBaseline) members.emplace_back(row->name);
    for (const std::string& member : params.members) {
      const SolverEntry& row = *find_member(rows, member);
      if (row.portfolio.role != PortfolioRole::kBaseline && row.accepts.chain)
        members.push_back(member);
    }
    Limits limits(options.work_limit, options.time_limit_s);
    std::optional<ChainSolveResult> best;
    std::vector<std::string> outcomes;
    StopReason stopped = StopReason::kConverged;
    for (size_t i = 0; i < members.size(); ++i) {
      SolveOptions o = part_options(options, limits, 1.0 / static_cast<double>(members.size() - i));
      if (const auto it = params.member_params.find(members[i]); it != params.member_params.end())
        o.params = it->second;
      ChainSolveResult r = others_.solve(chain, members[i], o);
      limits.spend(r.plan.stats.work);
      stopped = std::max(stopped, r.plan.stats.stop_reason);
      outcomes.push_back(fmt::format("{}: {}, peak {} bytes, cost {:.10g}, {:.3f} s", members[i],
                                     to_string(r.plan.stats.status), r.eval.peak_bytes, r.eval.cost,
                                     r.plan.stats.wall_time_s));
      if (!best || better_plan({r.eval.peak_bytes, r.eval.cost},
                               {best->eval.peak_bytes, best->eval.cost}, options.budget.bytes))
        best = std::move(r);
    }
    ChainPlan plan = std::move(best->plan);
    plan.stats.stop_reason = std::max(stopped, limits.reason());
    plan.stats.work = limits.spent();
    plan.stats.lists.emplace_back("auto_winner", std::vector<std::string>{plan.solver});
    plan.stats.lists.emplace_back("auto_members", std::move(outcomes));
    return plan;
  }

 private:
  const SolverDirectory& others_;
};

}  // namespace

std::unique_ptr<Solver> make(const SolverDirectory& others) {
  return std::make_unique<AutoSolver>(others);
}

// MEMBER.KEY parameters go to that member (docs/solvers/auto.md), beside these rows.
std::span<const ParamInfo> params() { return auto_param_table().info(); }

}  // namespace remat::auto_solver
