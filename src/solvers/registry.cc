// The solver registry: one line per solver (name, one-line description, factory, what it accepts).
#include <fmt/format.h>

#include "auto/auto.h"
#include "baseline/baseline.h"
#ifdef REMAT_HAVE_CBC
#include "checkmate/checkmate.h"
#endif
#include "fastsa/fastsa.h"
#include "mincut/mincut.h"
#ifdef REMAT_HAVE_GECODE
#include "moccasin/moccasin.h"
#endif
#include "remat/error.h"
#include "remat/solver.h"
#include "rockmate/rockmate.h"
#include "rotor/rotor.h"

namespace remat {
namespace {

constexpr SolverEntry kSolvers[] = {
    {"auto",
     "the best plan of every applicable solver (portfolio; the default)",
     auto_solver::make,
     {.chain = true}},
    {"none",
     "default schedule, no recomputation (the baseline; store-all on a chain)",
     baseline_solver::make,
     {.chain = true}},
    {"fastsa", "simulated annealing over sequences with grouping (FastSA), any DAG", fastsa::make},
    {"mincut",
     "fusion-aware min-cut of saved activations (joint graphs)",
     mincut::make,
     {.needs_phases = true}},
    {"rotor",
     "Rotor's optimal persistent chain DP (persistence=weak: Algorithm 1); on a joint graph, "
     "on its chain of stages",
     rotor::make_rotor,
     {.chain = true, .needs_phases = true}},
    {"revolve",
     "Griewank-Walther revolve on a chain, or on a joint graph's chain of stages",
     rotor::make_revolve,
     {.chain = true, .needs_phases = true}},
    {"sequential",
     "PyTorch checkpoint_sequential (best k segments) on a chain, or on a joint graph's chain",
     rotor::make_sequential,
     {.chain = true, .needs_phases = true}},
    {"store-all",
     "no recomputation on a chain: F_all every stage, then every B",
     rotor::make_store_all,
     {.graph = false, .chain = true}},
    {"rockmate",
     "Rockmate: per-block MILP options and rk-Rotor over the blocks (joint graphs)",
     rockmate::make_rockmate,
     {.needs_phases = true}},
// Rows of solvers behind an optional library sit inside its guard (REMAT_HAVE_CBC,
// REMAT_HAVE_GECODE; see src/solvers/CMakeLists.txt).
#ifdef REMAT_HAVE_GECODE
    {"moccasin", "MOCCASIN retention-interval CP on Gecode, fixed order (optimal within C_v)",
     moccasin::make},
#endif
#ifdef REMAT_HAVE_CBC
    {"checkmate", "Checkmate MILP over the default order (CBC), optimal or with a gap",
     checkmate::make_milp},
    {"checkmate-lp", "Checkmate LP relaxation (Clp) with rounding; LP value as lower bound",
     checkmate::make_lp},
#endif
};

}  // namespace

std::span<const SolverEntry> solver_registry() { return kSolvers; }

const SolverEntry& solver_entry(std::string_view name) {
  for (const SolverEntry& entry : kSolvers)
    if (entry.name == name) return entry;
  std::vector<std::string_view> names;
  for (const SolverEntry& entry : kSolvers) names.push_back(entry.name);
  throw InputError(fmt::format("unknown solver '{}' (known: {})", name, fmt::join(names, ", ")));
}

std::unique_ptr<Solver> make_solver(std::string_view name) { return solver_entry(name).make(); }

}  // namespace remat
