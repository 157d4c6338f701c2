// The solver registry: one line per solver (name, one-line description, factory).
#include <fmt/format.h>

#include "auto.h"
#include "baseline/baseline.h"
#include "fastsa/fastsa.h"
#include "mincut/mincut.h"
#ifdef REMAT_HAVE_GECODE
#include "moccasin/moccasin.h"
#endif
#include "remat/error.h"
#include "remat/solver.h"
#include "rockmate/rockmate.h"
#include "rotor/graph_solvers.h"

namespace remat {
namespace {

constexpr SolverEntry kSolvers[] = {
    {"auto", "the best plan of every applicable solver (portfolio; the default)",
     auto_solver::make},
    {"none", "default schedule, no recomputation (the baseline)", baseline_solver::make},
    {"fastsa", "simulated annealing over sequences with grouping (FastSA), any DAG", fastsa::make},
    {"mincut",
     "fusion-aware min-cut of saved activations (joint graphs)",
     mincut::make,
     {.needs_phases = true}},
    {"rotor",
     "Rotor's optimal chain DP on the graph's chain of stages (joint graphs)",
     rotor::make_rotor_on_graph,
     {.needs_phases = true}},
    {"revolve",
     "Griewank-Walther revolve on the graph's chain of stages (joint graphs)",
     rotor::make_revolve_on_graph,
     {.needs_phases = true}},
    {"sequential",
     "checkpoint_sequential on the graph's chain of stages (joint graphs)",
     rotor::make_sequential_on_graph,
     {.needs_phases = true}},
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
};

}  // namespace

std::span<const SolverEntry> solver_registry() { return kSolvers; }

std::unique_ptr<Solver> make_solver(std::string_view name) {
  for (const SolverEntry& entry : kSolvers)
    if (entry.name == name) return entry.make();
  std::vector<std::string_view> names;
  for (const SolverEntry& entry : kSolvers) names.push_back(entry.name);
  throw InputError(fmt::format("unknown solver '{}' (known: {})", name, fmt::join(names, ", ")));
}

}  // namespace remat
