// chain_solver.h — chain solvers (Rotor's DPs and the chain baselines), their registry, and the
// judged solve_chain(), the chain counterpart of remat::solve(): it runs a solver and sets the
// status from the chain simulator's peak, never from the solver's own estimate.
//   ChainSolveOptions options;  options.budget = {90 << 20};
//   ChainSolveResult r = solve_chain(chain, "rotor", options);
//   fmt::print("{} makespan {} peak {}\n", to_string(r.plan.stats.status), r.eval.makespan,
//              r.eval.peak_bytes);
// Solvers: rotor (Algorithm 3; `persistence=weak`: Algorithm 1), revolve, sequential, store-all
// (docs/solvers/rotor.md). A budget that no plan of the solver's family can meet returns that
// family's lowest-peak plan, status over-budget (or infeasible when proved for every plan), and
// stats.min_feasible_budget.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "chain_simulate.h"
#include "remat/chain.h"
#include "remat/plan.h"
#include "remat/solver.h"

namespace remat::rotor {

struct ChainSolveOptions {
  Budget budget;
  double time_limit_s = 60;
  ParamMap params;  // solver-specific, documented in docs/solvers/rotor.md
  std::function<void(const Progress&)> on_progress;
};

struct ChainPlan {
  ChainSequence ops;
  std::string solver;
  SolveStats stats;
};

struct ChainSolveResult {
  ChainPlan plan;
  ChainEvaluation eval;  // the chain simulator's verdict on plan.ops
};

class ChainSolver {
 public:
  virtual ~ChainSolver() = default;
  virtual std::string_view name() const = 0;
  virtual ChainPlan solve(const Chain& chain, const ChainSolveOptions& options) = 0;
  // Its parameter table's rows (remat/params.h), for --help and the docs check.
  virtual std::span<const ParamInfo> params() const { return {}; }
};

struct ChainSolverEntry {
  std::string_view name;
  std::string_view description;
  std::unique_ptr<ChainSolver> (*make)();
};
std::span<const ChainSolverEntry> chain_solver_registry();
// Throws InputError listing the known names.
std::unique_ptr<ChainSolver> make_chain_solver(std::string_view name);

ChainSolveResult solve_chain(const Chain& chain, std::string_view solver,
                             const ChainSolveOptions& options);

// The store-all sequence: F_all^1..F_all^{L+1}, B^{L+1}..B^1 (no recomputation).
ChainSequence store_all_sequence(const Chain& chain);

// Plan JSON, format "remat-chain-plan" v1 (docs/solvers/rotor.md): the ops, solver, budget,
// status, stats and the simulator's makespan and peak beside the store-all figures.
std::string chain_plan_to_json(const Chain& chain, const ChainSolveResult& result, Budget budget);
// Reads the ops of a chain plan; throws InputError naming the file and the op.
ChainSequence parse_chain_plan_json(std::string_view json_text, std::string_view source);

}  // namespace remat::rotor
