// solver.h — the interface every solver implements, the one registry, and the judged solve.
// A solver turns (graph, options) into a Plan, or (chain, options) into a ChainPlan; its registry
// row says which problem kinds it accepts. solve() below is how callers run one, for both kinds
// with one policy: it rejects budgets under the memory lower bound at once (graphs), runs the
// solver, re-simulates the sequence (simulate / simulate_chain) and sets the status from the
// simulator's peak, never from the solver's own estimate. A plan worse than the default schedule
// (store-all on a chain; by better_plan, remat/toolkit.h) is replaced by it (counter
// "replaced_by_default_schedule"): over budget always, within budget when the solver minimises
// cost (Solver::minimises_cost). Seed, threads, progress and the time limit are the
// same options on both sides; results have the same field names and units (a chain's cost is its
// makespan).
//   SolveOptions options;  options.budget = parse_budget("50%", baseline(g).peak_bytes);
//   SolveResult r = solve(g, "fastsa", options);
//   fmt::print("{} peak {} cost {}\n", to_string(r.plan.stats.status), r.eval.peak_bytes,
//   r.eval.cost);
//   ChainSolveResult c = solve(chain, "rotor", options);  // c.plan.sequence, c.eval.cost
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

struct SolveOptions {
  Budget budget;
  double time_limit_s = 60;
  uint64_t seed = 1;
  int threads = 1;  // 1..kMaxThreads
  ParamMap params;  // solver-specific, documented per solver
  std::function<void(const Progress&)> on_progress;
  // A plan to start the search from (a warm start, e.g. the best plan another solver found).
  // Empty: none. Only solvers whose accepts_start() is true take one; solve() rejects it for the
  // others and rejects a sequence the simulator finds invalid, so it is never silently ignored.
  Sequence start;
};

// A chain plan: the chain counterpart of Plan (plan.h), with the same fields.
struct ChainPlan {
  ChainSequence sequence;
  std::string solver;
  SolveStats stats;
};

class Solver {
 public:
  virtual ~Solver() = default;
  virtual std::string_view name() const = 0;
  // Each throws InputError unless the solver accepts that kind (its registry row's Accepts).
  virtual Plan solve(const Graph& graph, const SolveOptions& options);
  virtual ChainPlan solve_chain(const Chain& chain, const SolveOptions& options);
  // True when the solver starts from SolveOptions::start (see there).
  virtual bool accepts_start() const { return false; }
  // Its parameter table's rows (remat/params.h), for --help and the docs check.
  virtual std::span<const ParamInfo> params() const { return {}; }
  // True when the solver's objective is the least cost within the budget: the judge then replaces
  // a plan costlier than a default schedule that fits. False for the named fixed schemes (the
  // baselines, mincut's saved set for a fusing compiler): their plan is what the user asked for,
  // and only an over-budget plan with a higher peak than the default schedule gives way.
  virtual bool minimises_cost() const { return true; }
};

// What a registry row accepts: the problem kinds it solves and its preconditions on a graph.
// The registry property suite (tests/solvers/registry_property_test.cc) generates inputs from it.
struct Accepts {
  bool graph = true;
  bool chain = false;
  bool needs_phases = false;  // graph nodes carry forward/backward phases (joint training graphs)
};

struct SolverEntry {
  std::string_view name;
  std::string_view description;
  std::unique_ptr<Solver> (*make)();
  Accepts accepts;
};
// Every registered solver, in registry order.
std::span<const SolverEntry> solver_registry();
// Throws InputError listing the known names.
std::unique_ptr<Solver> make_solver(std::string_view name);

struct SolveResult {
  Plan plan;
  Evaluation eval;  // the simulator's verdict on plan.sequence
};
// Runs the named solver and judges its plan (see the header comment). A budget below
// memory_lower_bound() returns the default schedule with status kInfeasible without solving.
SolveResult solve(const Graph& graph, std::string_view solver, const SolveOptions& options);
// The same judge for a solver object that is not (or not yet) in the registry, e.g. in tests.
SolveResult solve(const Graph& graph, Solver& solver, const SolveOptions& options);

struct ChainSolveResult {
  ChainPlan plan;
  ChainEvaluation eval;  // the chain simulator's verdict on plan.sequence
};
// The judged solve on a chain (same policy; the chain has no lower bound of its own, so a solver
// that proves a budget infeasible says so with status kInfeasible and stats.min_feasible_budget).
// Throws InputError for a solver whose row does not accept chains, naming those that do.
ChainSolveResult solve(const Chain& chain, std::string_view solver, const SolveOptions& options);
ChainSolveResult solve(const Chain& chain, Solver& solver, const SolveOptions& options);

// The registry row of `name`; throws InputError listing the known names.
const SolverEntry& solver_entry(std::string_view name);

}  // namespace remat
