// milp.h — a thin adapter over CBC (MILP) and Clp (LP), the one place that talks to COIN-OR.
// A MilpModel is columns (bounds, objective, integrality) and rows (bounds, triplets); solve_milp
// and solve_lp run it under a time limit with CBC's log routed to a callback, never to stdout.
// Shared by checkmate and rockmate; it knows nothing about graphs.
//   MilpModel m;  int x = m.add_column(0, 1, 3.0, true);  m.add_row(-inf, 1, {{x, 1.0}});
//   MilpResult r = solve_milp(m, {.time_limit_s = 10});
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat::milp {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

struct Term {
  int32_t column;
  double coefficient;
};

struct MilpModel {
  std::vector<double> col_lower, col_upper, objective;
  std::vector<char> is_integer;
  std::vector<double> row_lower, row_upper;
  std::vector<int32_t> elem_row, elem_col;
  std::vector<double> elem_value;

  int32_t add_column(double lower, double upper, double cost, bool integer);
  int32_t add_row(double lower, double upper, std::span<const Term> terms);
  int32_t num_columns() const { return static_cast<int32_t>(col_lower.size()); }
  int32_t num_rows() const { return static_cast<int32_t>(row_lower.size()); }
  int64_t num_nonzeros() const { return static_cast<int64_t>(elem_value.size()); }
  // Largest violation of a bound, a row or integrality by `x` (0 when x is feasible).
  double max_violation(std::span<const double> x) const;
  double objective_value(std::span<const double> x) const;
};

enum class MilpStatus {
  kOptimal,     // proved optimal (for an LP: solved)
  kFeasible,    // an incumbent, no proof (time limit)
  kInfeasible,  // proved infeasible
  kNoSolution,  // stopped without an incumbent
};

// The work limit's unit (SolveOptions::work_limit) for LPs and MILPs: simplex iterations (CBC's
// and Clp's, heuristics' and cuts' included), kSimplexIterationsPerUnit a unit, each weighed up by
// the model's size (rows + columns + nonzeros) past kSimplexSizeScale: a dual simplex iteration
// costs about the same on the small and middle-sized Checkmate models, more on large ones
// (docs/limits.md; bench/work_unit_bench.cc measures the CPU seconds of a unit).
inline constexpr double kSimplexIterationsPerUnit = 2e4;
inline constexpr double kSimplexSizeScale = 1e6;
// Work units of one simplex iteration on `model`, and the iterations `work_units` buy.
double units_per_iteration(const MilpModel& model);
int64_t iterations_for(double work_units, const MilpModel& model);

struct MilpOptions {
  double time_limit_s = 60;  // wall clock, checked on every node and simplex iteration
  // Simplex iterations over the whole search (every LP, heuristics' included); the search stops
  // at the first node or solution event past it, an LP that alone runs a quarter past it is
  // ended. 0: none. Unlike the wall clock, a run stopped here ends at the same point on any
  // machine.
  int64_t iteration_limit = 0;
  uint64_t seed = 1;
  // Stop once the incumbent is within this fraction of the bound (CBC -ratio); 0: prove optimal.
  // With a gap, kOptimal means optimal within it (rockmate's per-block MILPs use 2 %).
  double relative_gap = 0;
  std::vector<double> start;                       // MIP start (all columns); empty: none
  std::function<void(std::string_view line)> log;  // CBC/Clp log lines; null: silent
};

struct MilpResult {
  MilpStatus status = MilpStatus::kNoSolution;
  std::vector<double> x;  // the incumbent (MILP) or the LP solution; empty when none
  double objective = 0;
  double bound = -kInf;  // best proven lower bound on the objective (minimisation)
  int64_t nodes = 0;
  bool stopped_on_time = false;        // the wall-clock limit (or an interrupt) ended the run
  bool stopped_on_iterations = false;  // iteration_limit ended it (and the wall clock did not)
  int64_t iterations = 0;              // simplex iterations of the search
};

MilpResult solve_milp(const MilpModel& model, const MilpOptions& options);
// The LP relaxation (integrality ignored), dual simplex with fixed options: deterministic. Past
// the iteration limit it stops without a solution (stopped_on_iterations).
MilpResult solve_lp(const MilpModel& model, const MilpOptions& options);
// Writes the model in free MPS (integrality markers included). Throws InputError on I/O failure.
void write_mps(const MilpModel& model, const std::string& path);

}  // namespace remat::milp
