// The solver interface's defaults and the Accepts check (solver.h).
#include "remat/solver.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "remat/error.h"

namespace remat {

void check_work_limit(double units) {
  if (!(std::isfinite(units) && units > 0 && units <= kMaxWorkLimit))
    throw InputError(
        fmt::format("work limit must be in (0, {:g}] work units (got {})", kMaxWorkLimit, units));
}

void check_time_limit(double seconds) {
  if (!(std::isfinite(seconds) && seconds > 0 && seconds <= kMaxTimeLimit))
    throw InputError(
        fmt::format("time limit must be in (0, {:g}] seconds (got {})", kMaxTimeLimit, seconds));
}

SolveOptions part_options(const SolveOptions& parent, const Limits& limits, double share) {
  SolveOptions o;
  o.budget = parent.budget;
  o.seed = parent.seed;
  o.threads = parent.threads;
  o.on_progress = parent.on_progress;
  o.cache = parent.cache;
  // Never 0: a part with nothing left stops at its first check.
  o.work_limit = std::clamp(share * limits.left(), 1e-9, kMaxWorkLimit);
  o.time_limit_s = std::clamp(share * limits.seconds_left(), 1e-3, kMaxTimeLimit);
  return o;
}

size_t SolveCache::size() const {
  const std::lock_guard lock(mutex_);
  return entries_.size();
}

std::shared_ptr<const void> SolveCache::find_entry(const std::string& key) const {
  const std::lock_guard lock(mutex_);
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second;
}

void SolveCache::store_entry(const std::string& key, std::shared_ptr<const void> value) {
  const std::lock_guard lock(mutex_);
  entries_[key] = std::move(value);
}

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

ParamMap fixed_order_params(const SolverEntry& row) {
  const std::string_view param = row.fixed_order_param;
  const size_t eq = param.find('=');
  if (eq == std::string_view::npos) return {};
  return {{std::string(param.substr(0, eq)), std::string(param.substr(eq + 1))}};
}

std::optional<std::string> not_applicable(const SolverEntry& row, const Graph& graph) {
  if (!row.accepts.graph) return fmt::format("solver '{}' takes chains, not graphs", row.name);
  if (!row.accepts.needs_phases) return std::nullopt;
  int32_t unlabelled = 0;
  const Node* first = nullptr;
  for (const Node& n : graph.nodes())
    if (n.phase == Phase::kUnknown && unlabelled++ == 0) first = &n;
  if (unlabelled == 0) return std::nullopt;
  const std::string needs = fmt::format(
      "solver '{}' needs a joint training graph with every node marked forward or backward",
      row.name);
  const std::string graph_name = shorten(graph.name(), 80), node = shorten(first->name, 80);
  if (row.accepts.needs_chain_structure)
    return fmt::format(
        "{}: graph '{}' has no chain structure: node '{}' has no phase ({} of {} "
        "nodes have none)",
        needs, graph_name, node, unlabelled, graph.num_nodes());
  return fmt::format("{}; {} of {} nodes of graph '{}' have no phase (first: '{}')", needs,
                     unlabelled, graph.num_nodes(), graph_name, node);
}

std::optional<std::string> not_applicable(const SolverEntry& row, const Chain&) {
  if (!row.accepts.chain) return fmt::format("solver '{}' takes graphs, not chains", row.name);
  return std::nullopt;
}

}  // namespace remat
