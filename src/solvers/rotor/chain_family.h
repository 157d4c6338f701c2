// chain_family.h — the base of the rows that solve chains and graphs (internal to
// src/solvers/rotor/): a derived class solves a chain (solve_chain) with its own parameter table
// (its row's table is that table and `max_stages`, with_max_stages);
// solve() on a graph is written once here (graph_solvers.cc): extract the chain, solve it, lower
// the chain plan and let the graph simulator judge it. When the lowered peak is over the budget
// while the chain plan fits, the chain budget is cut by the excess and the solve repeated (at most
// 3 times; counter `budget_retries`). A graph without chain structure is an InputError naming why.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "remat/params.h"
#include "remat/solver.h"

namespace remat::rotor {

class ChainFamilySolver : public Solver {
 public:
  Plan solve(const Graph& graph, const SolveOptions& options) final;

 protected:
  // `name` for messages; `params`: the row's parameter table (with_max_stages).
  ChainFamilySolver(std::string_view name, std::span<const ParamInfo> params)
      : name_(name), params_(params) {}
  std::string_view name() const { return name_; }
  std::span<const ParamInfo> params() const { return params_; }

 private:
  std::string_view name_;
  std::span<const ParamInfo> params_;
};

// The chain table's rows, then the graph-only `max_stages`.
std::vector<ParamInfo> with_max_stages(std::span<const ParamInfo> chain_rows);

}  // namespace remat::rotor
