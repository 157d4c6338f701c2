// solver.h — the interface every solver implements and the registry row that describes it, in
// remat_core so that a solver library needs nothing above the core. A solver turns (graph,
// options) into a Plan, or (chain, options) into a ChainPlan. Its row (SolverEntry) is the data
// other code asks about it: what it accepts, its parameter table, whether it takes a start plan,
// minimises cost or keeps the default order, its place in `auto`'s portfolio. The registry over
// every row and the judged solve() that runs one live above the solvers (remat/registry.h); a
// solver that runs other solvers (auto, moccasin's warm start, checkmate's annealing) gets them
// through the SolverDirectory its factory receives, never by linking the registry.
//   std::unique_ptr<Solver> s = row.make(directory);
//   Plan p = s->solve(graph, options);  // then judged: simulate(graph, p.sequence)
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "remat/chain.h"
#include "remat/graph.h"
#include "remat/params.h"
#include "remat/plan.h"
#include "remat/simulate.h"
#include "remat/toolkit.h"

namespace remat {

struct Budget {
  int64_t bytes = 0;
};

// "50%" (of `baseline_peak_bytes`), "123456", "90MB", "1.5GiB" (SI: KB MB GB TB; binary: KiB MiB
// GiB TiB). Throws InputError naming the text.
Budget parse_budget(std::string_view text, int64_t baseline_peak_bytes);
std::string format_bytes(int64_t bytes);

struct Progress {
  std::string_view stage;  // "stage 1", "dp", ...
  double fraction = -1;    // 0..1 when known, -1 otherwise
  int64_t iterations = 0;
  double best_objective = -1;  // solver-specific; -1 when none yet
  // The best plan so far in the simulator's units, when the solver tracks them; -1 otherwise.
  int64_t best_peak_bytes = -1;
  double best_cost = -1;
};

// The most threads a solve may use: solvers run at most one worker per hardware thread, and more
// requested threads only add work that the time limit must cut short.
inline constexpr int kMaxThreads = 256;

// The work limit (SolveOptions::work_limit) is in work units: a unit is close to one second of one
// core of the reference machine on each solver's reference workload. Every solver counts its own
// operations (annealing moves, DP entries, simplex iterations, propagations; docs/limits.md says
// which, and bench/work_unit_bench.cc measures their rates), so a search that stops on its work
// limit gives the same plan on a loaded machine as on an idle one. The wall clock (time_limit_s)
// is the backstop.
inline constexpr double kDefaultWorkLimit = 60;
inline constexpr double kMaxWorkLimit = 1e7;
// Seconds: larger values gain nothing and would overflow the deadline's clock arithmetic.
inline constexpr double kMaxTimeLimit = 1e7;
// The time limit a front end uses when it is given none: a backstop that a run on a machine ten
// times slower than the reference (or as loaded) still does not reach.
inline constexpr double backstop_time_limit(double work_limit) {
  return std::min(kMaxTimeLimit, 10 * work_limit + 10);
}
// The one check of each range, shared by the CLI, Python and the judged solve: InputError naming
// the range.
void check_work_limit(double units);
void check_time_limit(double seconds);

// What a solver may keep between the solves of one caller (rockmate's block options, by their
// content and parameters): the caller owns it and lends it through SolveOptions::cache, so a test
// gets a fresh one and a front end keeps the benefit over the solves of one command or process.
// Safe to share between threads. An entry holds a value of the type it was stored with; keys
// start with the solver's name.
class SolveCache {
 public:
  template <class T>
  std::shared_ptr<const T> find(const std::string& key) const {
    return std::static_pointer_cast<const T>(find_entry(key));
  }
  template <class T>
  void store(const std::string& key, T value) {
    store_entry(key, std::make_shared<const T>(std::move(value)));
  }
  size_t size() const;

 private:
  std::shared_ptr<const void> find_entry(const std::string& key) const;
  void store_entry(const std::string& key, std::shared_ptr<const void> value);
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const void>, std::less<>> entries_;
};

struct SolveOptions {
  Budget budget;
  // The deterministic stop, in work units (above). A solver shares it among its parts; a
  // portfolio among its members.
  double work_limit = kDefaultWorkLimit;
  // The wall-clock backstop, from the first instruction of the judged solve.
  double time_limit_s = backstop_time_limit(kDefaultWorkLimit);
  uint64_t seed = 1;
  int threads = 1;  // 1..kMaxThreads
  ParamMap params;  // solver-specific, documented per solver
  std::function<void(const Progress&)> on_progress;
  // A plan to start the search from (a warm start, e.g. the best plan another solver found, or a
  // plan file a front end read). Empty: none. Only rows with accepts_start take one; the judged
  // solve rejects it for the others and rejects a sequence the simulator finds invalid, so it is
  // never silently ignored.
  Sequence start;
  // Not owned; nullptr: nothing is kept between solves.
  SolveCache* cache = nullptr;
};

// The options of a solve that is part of another (a warm start, a portfolio member): the
// parent's budget, seed, threads, progress and cache, `share` of the work and seconds `limits`
// has left, no parameters and no start.
SolveOptions part_options(const SolveOptions& parent, const Limits& limits, double share);

// A chain plan: the chain counterpart of Plan (plan.h), with the same fields.
struct ChainPlan {
  ChainSequence sequence;
  std::string solver;
  SolveStats stats;
};

class Solver {
 public:
  virtual ~Solver();
  // Each throws InputError unless the solver accepts that kind (its row's Accepts); the judged
  // solve checks the row before calling.
  virtual Plan solve(const Graph& graph, const SolveOptions& options);
  virtual ChainPlan solve_chain(const Chain& chain, const SolveOptions& options);
};

// What a row accepts: the problem kinds it solves and its preconditions on a graph. The judged
// solve checks them before running the solver (not_applicable below); the registry property suite
// (tests/solvers/registry_property_test.cc) generates inputs from them.
struct Accepts {
  bool graph = true;
  bool chain = false;
  // Every node forward or backward (a joint training graph).
  bool needs_phases = false;
  // A chain of stages (extract_chain, remat/lower.h). Finding one is the solver's own first step,
  // so the judge does not repeat it: the solver throws UnsupportedGraph when there is none.
  bool needs_chain_structure = false;
};

// A row's part in `auto`'s portfolio (src/solvers/auto/auto.h).
enum class PortfolioRole {
  kNone,      // not a member
  kBaseline,  // the default schedule: always runs first, so `auto` is never worse than it
  kMember,    // runs once, in registry order, with its share of the work left
  // Runs last with the work left: cold, then warm-started from the members' plans (it must accept
  // a start), restarted, on two passes and as a polish (auto.h).
  kFinisher,
};
// `auto` divides work, not seconds (SolveOptions::work_limit), so its plan is the same on a loaded
// machine as on an idle one; each run's time limit is the same share of the seconds left.
struct PortfolioPlace {
  PortfolioRole role = PortfolioRole::kNone;
  double share = 0.2;                                         // of the work left (kMember)
  double max_work = std::numeric_limits<double>::infinity();  // work units
  int64_t max_nodes = 0;  // > 0: graphs with more nodes skip it (auto's checkmate_max_nodes)
  // kMember: it runs only when no plan before it fits the budget (a rescue, not a rival).
  bool when_nothing_fits = false;
};

class SolverDirectory;

// One registry row: the solver's name and everything other code asks about it.
struct SolverEntry {
  std::string_view name;
  std::string_view description;
  std::unique_ptr<Solver> (*make)(const SolverDirectory& others);
  Accepts accepts;
  // Its parameter table's rows (remat/params.h), for --help and the docs check; nullptr: none.
  std::span<const ParamInfo> (*params)() = nullptr;
  bool accepts_start = false;  // takes SolveOptions::start
  // The objective is the least cost within the budget: the judge then replaces a plan costlier
  // than a default schedule that fits. False for the named fixed schemes (the baselines, mincut's
  // saved set for a fusing compiler): their plan is what the user asked for, and only an
  // over-budget plan with a higher peak than the default schedule gives way.
  bool minimises_cost = true;
  // Every plan keeps the default order of first computations: its bounds and proofs hold over
  // that class of plans only (a reordering solver may go below them).
  bool keeps_default_order = false;
  // The parameter (KEY=VALUE) under which its plans keep the default order; empty: none, or
  // keeps_default_order holds without it.
  std::string_view fixed_order_param;
  // It gives solvers over the default order their first plan (MOCCASIN's warm=auto), on graphs of
  // at most warm_start_max_nodes nodes (0: any).
  bool warm_starts = false;
  int64_t warm_start_max_nodes = 0;
  PortfolioPlace portfolio;
  // MEMBER.KEY parameters go to the portfolio's members (the rows with a portfolio place): auto.
  bool forwards_member_params = false;
  // The row that solves this one's problem on a chain of opaque blocks (rockmate: rotor), for
  // front ends that only have a chain; empty: this row itself.
  std::string_view on_chain;
};

// The parameters under which `row`'s plans keep the default order: its fixed_order_param as a
// map (empty when it has none).
ParamMap fixed_order_params(const SolverEntry& row);

// Why `row` cannot take this problem (its Accepts), or nullopt when it can.
std::optional<std::string> not_applicable(const SolverEntry& row, const Graph& graph);
std::optional<std::string> not_applicable(const SolverEntry& row, const Chain& chain);

struct SolveResult {
  Plan plan;
  Evaluation eval;  // the simulator's verdict on plan.sequence
};

struct ChainSolveResult {
  ChainPlan plan;
  ChainEvaluation eval;  // the chain simulator's verdict on plan.sequence
};

// The solvers a solver may run: the rows of this build and the judged solve of each, by name.
// The registry (remat/registry.h) is one; a test may pass its own.
class SolverDirectory {
 public:
  virtual ~SolverDirectory();
  virtual std::span<const SolverEntry> rows() const = 0;
  // The judged solve of the row named `solver` (remat/registry.h); InputError for an unknown name.
  virtual SolveResult solve(const Graph& graph, std::string_view solver,
                            const SolveOptions& options) const = 0;
  virtual ChainSolveResult solve(const Chain& chain, std::string_view solver,
                                 const SolveOptions& options) const = 0;

  // The row named `name`, or nullptr when this build has none.
  const SolverEntry* find(std::string_view name) const;
};

}  // namespace remat
