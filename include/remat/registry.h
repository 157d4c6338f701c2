// registry.h — every solver of this build by name (one row each, solver.h's SolverEntry), and the
// judged solve that runs one: the library above all solver libraries (remat_solvers). The judged
// solve has one policy for graphs and chains: it checks the row's Accepts (a problem the row does
// not take is UnsupportedGraph, so `remat compare` marks that row and goes on), rejects budgets
// under the memory lower bound at once (graphs), runs the solver, re-simulates the sequence
// (simulate / simulate_chain) and sets the status from the simulator's peak, never from the
// solver's own estimate. A plan worse than the default schedule (store-all on a chain; by
// better_plan, remat/toolkit.h) is replaced by it (counter "replaced_by_default_schedule"): over
// budget always, within budget when the row minimises cost. Seed, threads, progress and the time
// limit are the same options on both sides; results have the same field names and units (a
// chain's cost is its makespan).
//   SolveOptions options;  options.budget = parse_budget("50%", baseline(g).peak_bytes);
//   SolveResult r = solve(g, "fastsa", options);
//   fmt::print("{} peak {} cost {}\n", to_string(r.plan.stats.status), r.eval.peak_bytes,
//   r.eval.cost);
//   ChainSolveResult c = solve(chain, "rotor", options);  // c.plan.sequence, c.eval.cost
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "remat/solver.h"

namespace remat {

// Every registered solver, in registry order.
std::span<const SolverEntry> solver_registry();
// The registry row of `name`; throws InputError listing the known names.
const SolverEntry& solver_entry(std::string_view name);
// Throws InputError listing the known names.
std::unique_ptr<Solver> make_solver(std::string_view name);
// The registry as the directory a solver's factory receives (solver.h).
const SolverDirectory& registry_directory();

// Runs the named solver and judges its plan (see the header comment). A budget below
// memory_lower_bound() returns the default schedule with status kInfeasible without solving.
SolveResult solve(const Graph& graph, std::string_view solver, const SolveOptions& options);
// The same judge for a row that is not (or not yet) in the registry, e.g. in tests.
SolveResult solve(const Graph& graph, const SolverEntry& row, const SolveOptions& options);

// The judged solve on a chain (same policy; the chain has no lower bound of its own, so a solver
// that proves a budget infeasible says so with status kInfeasible and stats.min_feasible_budget).
// A row that does not accept chains is UnsupportedGraph, naming the rows that do.
ChainSolveResult solve(const Chain& chain, std::string_view solver, const SolveOptions& options);
ChainSolveResult solve(const Chain& chain, const SolverEntry& row, const SolveOptions& options);

}  // namespace remat
