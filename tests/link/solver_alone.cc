// solver_alone — one solver library linked alone with the core (and the shared libraries it
// declares): no registry, no other solver. It builds the solver through its factory with a
// directory that holds a single row of its own (the default schedule), solves a generated problem
// and checks the plan with the simulator. tests/CMakeLists.txt builds it once per solver library,
// naming the library in REMAT_LINK_<SOLVER>; a solver that needed the registry or another solver's
// internals would fail to link here. The inputs come from remat_gen, which needs only the core.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "remat/error.h"
#include "remat/generate.h"
#include "remat/simulate.h"
#include "remat/solver.h"

#if defined(REMAT_LINK_AUTO)
#include "auto/auto.h"
#elif defined(REMAT_LINK_BASELINE)
#include "baseline/baseline.h"
#elif defined(REMAT_LINK_CHECKMATE)
#include "checkmate/checkmate.h"
#elif defined(REMAT_LINK_DTR)
#include "dtr/dtr.h"
#elif defined(REMAT_LINK_FASTSA)
#include "fastsa/fastsa.h"
#elif defined(REMAT_LINK_GREEDY)
#include "greedy/greedy.h"
#elif defined(REMAT_LINK_MINCUT)
#include "mincut/mincut.h"
#elif defined(REMAT_LINK_MOCCASIN)
#include "moccasin/moccasin.h"
#elif defined(REMAT_LINK_ROCKMATE)
#include "rockmate/rockmate.h"
#elif defined(REMAT_LINK_ROTOR)
#include "rotor/rotor.h"
#else
#error "name the solver library: REMAT_LINK_<SOLVER>"
#endif

namespace remat {
namespace {

class DefaultSchedule final : public Solver {
 public:
  Plan solve(const Graph& graph, const SolveOptions&) override {
    return Plan{.sequence = default_schedule(graph)};
  }
};

// A directory of one row, `none`, run without the registry's judge: enough for solvers that run
// others (auto's baseline member). Any other name is an InputError, as in a build without it.
class OneRowDirectory final : public SolverDirectory {
 public:
  std::span<const SolverEntry> rows() const override { return {&row_, 1}; }
  SolveResult solve(const Graph& graph, std::string_view solver,
                    const SolveOptions& options) const override {
    if (solver != row_.name)
      throw InputError(fmt::format("solver '{}' is not in this directory", solver));
    SolveResult r;
    r.plan = row_.make(*this)->solve(graph, options);
    r.plan.solver = std::string(row_.name);
    r.eval = simulate(graph, r.plan.sequence);
    return r;
  }
  ChainSolveResult solve(const Chain&, std::string_view solver,
                         const SolveOptions&) const override {
    throw InputError(fmt::format("solver '{}': this directory solves no chains", solver));
  }

 private:
  SolverEntry row_ = {.name = "none",
                      .description = "the default schedule",
                      .make = [](const SolverDirectory&) -> std::unique_ptr<Solver> {
                        return std::make_unique<DefaultSchedule>();
                      },
                      .minimises_cost = false,
                      .portfolio = {.role = PortfolioRole::kBaseline}};
};

// Solves `graph` at 80 % of its baseline peak; false (with a message) unless the plan is valid.
bool solves_graph(Solver& solver, const Graph& graph, ParamMap params) {
  SolveOptions options;
  options.budget = {baseline(graph).peak_bytes * 8 / 10};
  options.time_limit_s = 1;  // a run to link and check, not to measure
  options.params = std::move(params);
  const Plan plan = solver.solve(graph, options);
  const Evaluation e = simulate(graph, plan.sequence);
  std::printf("graph %s: %zu steps, valid %d, peak %lld\n", graph.name().c_str(),
              plan.sequence.size(), e.valid ? 1 : 0, static_cast<long long>(e.peak_bytes));
  return e.valid;
}

[[maybe_unused]] bool solves_chain(Solver& solver, const Chain& chain) {
  SolveOptions options;
  options.budget = {simulate_chain(chain, store_all_sequence(chain)).peak_bytes * 6 / 10};
  const ChainPlan plan = solver.solve_chain(chain, options);
  const ChainEvaluation e = simulate_chain(chain, plan.sequence);
  std::printf("chain %s: %zu ops, valid %d\n", chain.name.c_str(), plan.sequence.size(),
              e.valid ? 1 : 0);
  return e.valid;
}

bool run() {
  const OneRowDirectory others;
  const Graph layered = generate_random_layered({.num_nodes = 12, .seed = 1});
  const Graph joint = generate_joint({.num_nodes = 30, .seed = 1, .rows = 1024, .max_width = 128});
  const Chain chain = generate_chain({.kind = "random", .length = 6, .seed = 1, .max_size = 20});
#if defined(REMAT_LINK_AUTO)
  return solves_graph(*auto_solver::make(others), layered, {});
#elif defined(REMAT_LINK_BASELINE)
  return solves_graph(*baseline_solver::make(others), layered, {});
#elif defined(REMAT_LINK_CHECKMATE)
  // Without fastsa in the directory, the MILP runs from its repair heuristics alone.
  return solves_graph(*checkmate::make_milp(others), layered, {{"anneal", "false"}}) &&
         solves_graph(*checkmate::make_lp(others), layered, {});
#elif defined(REMAT_LINK_DTR)
  return solves_graph(*dtr::make(others), layered, {});
#elif defined(REMAT_LINK_FASTSA)
  return solves_graph(*fastsa::make(others), layered, {{"iterations_scale", "0.01"}});
#elif defined(REMAT_LINK_GREEDY)
  return solves_graph(*greedy::make(others), joint, {});
#elif defined(REMAT_LINK_MINCUT)
  return solves_graph(*mincut::make(others), joint, {});
#elif defined(REMAT_LINK_MOCCASIN)
  return solves_graph(*moccasin::make(others), layered, {{"warm", "none"}});
#elif defined(REMAT_LINK_ROCKMATE)
  return solves_graph(*rockmate::make_rockmate(others), joint, {{"budgets", "2x2"}});
#elif defined(REMAT_LINK_ROTOR)
  return solves_graph(*rotor::make_rotor(others), joint, {}) &&
         solves_chain(*rotor::make_rotor(others), chain);
#endif
}

}  // namespace
}  // namespace remat

int main() {
  try {
    return remat::run() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "solver_alone: %s\n", e.what());
    return 1;
  }
}
