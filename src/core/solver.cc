// The solver interface's defaults and the Accepts check (solver.h).
#include "remat/solver.h"

#include <fmt/format.h>

#include "remat/error.h"

namespace remat {

Solver::~Solver() = default;

Plan Solver::solve(const Graph&, const SolveOptions&) {
  throw InputError("this solver takes chains, not graphs");
}

ChainPlan Solver::solve_chain(const Chain&, const SolveOptions&) {
  throw InputError("this solver takes graphs, not chains");
}

SolverDirectory::~SolverDirectory() = default;

const SolverEntry* SolverDirectory::find(std::string_view name) const {
  for (const SolverEntry& row : rows())
    if (row.name == name) return &row;
  return nullptr;
}

std::optional<std::string> not_applicable(const SolverEntry& row, const Graph& graph) {
  if (!row.accepts.graph) return fmt::format("solver '{}' takes chains, not graphs", row.name);
  if (!row.accepts.needs_phases) return std::nullopt;
  int32_t unlabelled = 0;
  const Node* first = nullptr;
  for (const Node& n : graph.nodes())
    if (n.phase == Phase::kUnknown && unlabelled++ == 0) first = &n;
  if (unlabelled == 0) return std::nullopt;
  return fmt::format(
      "solver '{}' needs a joint training graph with every node marked forward or backward; {} "
      "of {} nodes of graph '{}' have no phase (first: '{}')",
      row.name, unlabelled, graph.num_nodes(), shorten(graph.name(), 80), shorten(first->name, 80));
}

std::optional<std::string> not_applicable(const SolverEntry& row, const Chain&) {
  if (!row.accepts.chain) return fmt::format("solver '{}' takes graphs, not chains", row.name);
  return std::nullopt;
}

}  // namespace remat
