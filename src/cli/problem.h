// problem.h — the one dispatch on the file kind for every subcommand: a problem file is a graph
// (remat-graph or NetworkX) or a chain (remat-chain), read once. The judged solve on either kind
// is reduced to the figures the subcommands print, in the same units (a chain's cost is its
// makespan; its default schedule is store-all).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "common.h"
#include "remat/chain.h"
#include "remat/graph.h"
#include "remat/registry.h"

namespace remat::cli {

struct Problem {
  std::string path;
  std::variant<Chain, Graph> data;  // Chain first: Graph has no default
  int64_t baseline_peak = 0;        // the default schedule's peak (store-all on a chain)
  double baseline_cost = 0;

  const Graph* graph() const { return std::get_if<Graph>(&data); }
  const Chain* chain() const { return std::get_if<Chain>(&data); }
  std::string_view kind() const { return chain() ? "chain" : "graph"; }
  // The problem's own name, else the path, escaped for a terminal (remat::escape_control).
  std::string display_name() const;
};
Problem read_problem(const std::string& path);

// Why `solver` cannot take this problem (its registry row's Accepts), or nullopt when it can.
// Throws InputError for an unknown solver.
std::optional<std::string> refusal(const Problem& problem, std::string_view solver);

struct Outcome {
  std::string solver;
  SolveStats stats;
  int64_t peak_bytes = 0;
  double cost = 0;
  int64_t steps = 0;
  int64_t recomputations = 0;  // steps beyond one run of each node (graphs) or stage (chains)
  std::string sequence_text;   // the paper's notation, chains only
  std::string plan_json;       // plan JSON or chain plan JSON
};
Outcome solve_problem(const Problem& problem, std::string_view solver, const SolveOptions& options);

}  // namespace remat::cli
