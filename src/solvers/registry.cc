// The solver registry: one row per solver (solver.h's SolverEntry), the data every other part
// of remat asks about a solver by: what it accepts, its parameters, its properties and its place
// in `auto`'s portfolio.
#include <fmt/format.h>

#include <vector>

#include "auto/auto.h"
#include "baseline/baseline.h"
#ifdef REMAT_HAVE_CBC
#include "checkmate/checkmate.h"
#endif
#include "dtr/dtr.h"
#include "fastsa/fastsa.h"
#include "greedy/greedy.h"
#include "mincut/mincut.h"
#ifdef REMAT_HAVE_GECODE
#include "moccasin/moccasin.h"
#endif
#include "remat/error.h"
#include "remat/registry.h"
#include "rockmate/rockmate.h"
#include "rotor/rotor.h"

namespace remat {
namespace {

// `auto` gives most members a fifth of the work left (auto.h).
constexpr PortfolioPlace kMember = {.role = PortfolioRole::kMember, .share = 0.2};

std::vector<SolverEntry> make_rows() {
  std::vector<SolverEntry> rows = {
      {.name = "auto",
       .description = "the best plan of every applicable solver (portfolio; the default)",
       .make = auto_solver::make,
       .accepts = {.chain = true},
       .params = auto_solver::params,
       // Its members stop on their shares of the work.
       .forwards_member_params = true},
      {.name = "none",
       .description = "default schedule, no recomputation (the baseline; store-all on a chain)",
       .make = baseline_solver::make,
       .accepts = {.chain = true},
       .minimises_cost = false,  // the default schedule itself
       .portfolio = {.role = PortfolioRole::kBaseline}},
      {.name = "fastsa",
       .description = "simulated annealing over sequences with grouping (FastSA), any DAG",
       .make = fastsa::make,
       .params = fastsa::params,
       .accepts_start = true,
       .fixed_order_param = "mode=fixed-order",
       .warm_starts = true,
       // The rest of the time: it works on any graph and improves on the others' plans.
       .portfolio = {.role = PortfolioRole::kFinisher, .share = 1.0}},
      {.name = "mincut",
       .description = "fusion-aware min-cut of saved activations (joint graphs)",
       .make = mincut::make,
       .accepts = {.needs_phases = true},
       .params = mincut::params,
       // Its objective is the saved set for a fusing compiler, not the simulator's cost.
       .minimises_cost = false,
       .portfolio = kMember},
      {.name = "greedy",
       .description = "greedy recomputation: the forward step lowering the peak most per cost, "
                      "each round (joint graphs)",
       .make = greedy::make,
       .accepts = {.needs_phases = true},
       .params = greedy::params},
      {.name = "rotor",
       .description =
           "Rotor's optimal persistent chain DP (persistence=weak: Algorithm 1); on a joint graph, "
           "on its chain of stages",
       .make = rotor::make_rotor,
       .accepts = {.chain = true, .needs_phases = true, .needs_chain_structure = true},
       .params = rotor::rotor_params,
       .portfolio = kMember},
      {.name = "revolve",
       .description = "Griewank-Walther revolve on a chain, or on a joint graph's chain of stages",
       .make = rotor::make_revolve,
       .accepts = {.chain = true, .needs_phases = true, .needs_chain_structure = true},
       .params = rotor::revolve_params,
       .minimises_cost = false},  // the binomial scheme, as named
      {.name = "sequential",
       .description =
           "PyTorch checkpoint_sequential (best k segments) on a chain, or on a joint graph's "
           "chain",
       .make = rotor::make_sequential,
       .accepts = {.chain = true, .needs_phases = true, .needs_chain_structure = true},
       .params = rotor::sequential_params,
       .minimises_cost = false},  // checkpoint_sequential, as named
      {.name = "store-all",
       .description = "no recomputation on a chain: F_all every stage, then every B",
       .make = rotor::make_store_all,
       .accepts = {.graph = false, .chain = true},
       .minimises_cost = false},  // the default schedule itself
      {.name = "rockmate",
       .description =
           "Rockmate: per-block MILP options and rk-Rotor over the blocks (joint graphs)",
       .make = rockmate::make_rockmate,
       .accepts = {.needs_phases = true, .needs_chain_structure = true},
       .params = rockmate::params,
       .portfolio = kMember,
       // On opaque blocks every block has keep-all and keep-nothing only: Rotor's DP.
       .on_chain = "rotor"},
      {.name = "dtr",
       .description = "Dynamic Tensor Rematerialization ahead of time: the default schedule, "
                      "evicting the value of least cost per byte and step until its next read "
                      "and recomputing it on demand, any DAG",
       .make = dtr::make,
       .params = dtr::params,
       // After the other members, only when none of their plans fits: where they find nothing
       // within the budget its replay may (its plan then starts FastSA); where one fits, the
       // portfolio runs as it did without it. A twentieth of the work: a joint graph's replay
       // needs far less, and on random layered graphs of 100,000 nodes a larger share, taken
       // from FastSA, does not finish one replay either (bench/auto_speed_bench.py).
       .portfolio = {.role = PortfolioRole::kMember, .share = 0.05, .when_nothing_fits = true}},
  };
  // Rows of solvers behind an optional library sit inside its guard (REMAT_HAVE_CBC,
  // REMAT_HAVE_GECODE; see src/solvers/CMakeLists.txt).
#ifdef REMAT_HAVE_GECODE
  rows.push_back(
      {.name = "moccasin",
       .description = "MOCCASIN retention-interval CP on Gecode, fixed order (optimal within C_v)",
       .make = moccasin::make,
       .params = moccasin::params,
       .accepts_start = true,
       .fixed_order_param = "order=fixed"});  // the default; order=free reorders
#endif
#ifdef REMAT_HAVE_CBC
  rows.push_back(
      {.name = "checkmate",
       .description = "Checkmate MILP over the default order (CBC), optimal or with a gap",
       .make = checkmate::make_milp,
       .params = checkmate::milp_params,
       .accepts_start = true,
       .keeps_default_order = true,
       // Its MILP has O(n^2) binaries over a fixed order: up to 30 nodes CBC usually proves the
       // optimum within a few seconds; above it (already at 40 random layered nodes) it often runs
       // to its work limit, which is better spent on FastSA. So it gets at most 10 % of the work
       // left, at most 5 units, on graphs of at most 30 nodes.
       .portfolio = {
           .role = PortfolioRole::kMember, .share = 0.1, .max_work = 5.0, .max_nodes = 30}});
  rows.push_back(
      {.name = "checkmate-lp",
       .description = "Checkmate LP relaxation (Clp) with rounding; LP value as lower bound",
       .make = checkmate::make_lp,
       .params = checkmate::lp_params,
       .keeps_default_order = true,
       .warm_starts = true,
       // Its LP has O(n^2) variables: on 250 nodes it takes a whole MOCCASIN run and plans worse
       // than MOCCASIN alone (checkmate_bench prints its seconds).
       .warm_start_max_nodes = 150});
#endif
  return rows;
}

class Registry final : public SolverDirectory {
 public:
  std::span<const SolverEntry> rows() const override { return rows_; }
  SolveResult solve(const Graph& graph, std::string_view solver,
                    const SolveOptions& options) const override {
    return remat::solve(graph, solver, options);
  }
  ChainSolveResult solve(const Chain& chain, std::string_view solver,
                         const SolveOptions& options) const override {
    return remat::solve(chain, solver, options);
  }

 private:
  const std::vector<SolverEntry> rows_ = make_rows();
};

const Registry& registry() {
  static const Registry instance;
  return instance;
}

}  // namespace

std::span<const SolverEntry> solver_registry() { return registry().rows(); }

const SolverDirectory& registry_directory() { return registry(); }

const SolverEntry& solver_entry(std::string_view name) {
  if (const SolverEntry* row = registry().find(name)) return *row;
  std::vector<std::string_view> names;
  for (const SolverEntry& row : solver_registry()) names.push_back(row.name);
  throw InputError(
      fmt::format("unknown solver '{}' (known: {})", shorten(name, 80), fmt::join(names, ", ")));
}

std::unique_ptr<Solver> make_solver(std::string_view name) {
  return solver_entry(name).make(registry_directory());
}

}  // namespace remat
