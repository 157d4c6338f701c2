// formulation.h — Checkmate's fixed-order MILP at value level (docs/solvers/checkmate.md), reusable
// on any Graph. Stage t (0-based) ends with the first computation of node t and may recompute
// earlier nodes. Variables: R(t,i) node i runs in stage t; S(t,v) value v is held at the start of
// stage t; FREE(t,v,k) continuous, v freed after step k of stage t; U(t,k) memory after step k. The
// StageModel is both the model and its decoder: it maps (R,S) to columns and back to a Sequence
// with the R-from-S pass. Rockmate adds rows (M_save) through `model`.
//   StageModel sm = build_stage_model(g, budget);
//   MilpResult r = solve_milp(sm.model, {});
//   Sequence seq = sequence_from_retention(g, sm.retention(r.x));
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "milp/milp.h"
#include "remat/graph.h"
#include "remat/plan.h"
#include "remat/toolkit.h"

namespace remat::checkmate {

// A retention pattern: held(t, v) for t in [0, T] (row T is the virtual end: graph outputs).
class Retention {
 public:
  Retention(int32_t stages, int32_t values)
      : values_(values), bits_(static_cast<size_t>(stages + 1) * static_cast<size_t>(values), 0) {}
  bool held(int32_t t, ValueId v) const { return bits_[index(t, v)] != 0; }
  void set(int32_t t, ValueId v, bool on) { bits_[index(t, v)] = on ? 1 : 0; }

 private:
  size_t index(int32_t t, ValueId v) const {
    return static_cast<size_t>(t) * static_cast<size_t>(values_) + static_cast<size_t>(v.value());
  }
  int32_t values_;
  std::vector<char> bits_;
};

struct ModelSize {
  int64_t columns = 0, rows = 0, nonzeros = 0;
};
// Counts without building (for the size guard).
ModelSize estimate_model_size(const Graph& graph);

struct FreeVar {
  int32_t column, stage, step;
  ValueId value;
  std::vector<int32_t> later_steps;  // users of value after `step` in the stage
};
struct MemoryRow {
  int32_t u;                         // U(t,k)
  std::vector<milp::Term> defining;  // U - (terms) = 0, U first
};

struct StageModel {
  const Graph* graph = nullptr;
  milp::MilpModel model;
  int64_t size_scale = 1;      // sizes and budget were divided by this gcd
  double cost_scale = 1;       // objective = cost / cost_scale
  std::vector<int32_t> r_col;  // R(t,i) at r_col[t*T + i], -1 when absent
  std::vector<int32_t> s_col;  // S(t,v) at s_col[t*V + v], -1 when absent
  std::vector<FreeVar> frees;
  std::vector<MemoryRow> memory_rows;  // in stage and step order

  int32_t stages() const { return graph->num_nodes(); }
  int32_t r(int32_t t, int32_t i) const;
  int32_t s(int32_t t, ValueId v) const;
  // S rounded at `threshold` (virtual row T: graph outputs).
  Retention retention(std::span<const double> x, double threshold = 0.5) const;
  // Full column vector for a plan given as stages of R, with S the least retention it needs and
  // FREE/U implied; nullopt when it violates the model (e.g. over budget).
  std::optional<std::vector<double>> encode(const Sequence& sequence) const;
};

// Builds the model for `budget_bytes` (graph inputs count against it). Throws UnsupportedGraph when
// the sizes and temps over their gcd exceed 2^40 units (beyond what CBC solves without aborting).
StageModel build_stage_model(const Graph& graph, int64_t budget_bytes);

// R-from-S: the cheapest R that realises `held`, concatenated stage by stage.
Sequence sequence_from_retention(const Graph& graph, const Retention& held);
// The retention a fixed-order sequence needs (values live at stage boundaries); nullopt when the
// first computations do not follow the node order.
std::optional<Retention> retention_from_sequence(const Graph& graph, const Sequence& sequence);
// The work (SolveOptions::work_limit) of the two searches below: each plan they judge is decoded
// and simulated, about stages x (nodes + values) steps, this many a work unit (docs/limits.md;
// bench/work_unit_bench.cc measures it). They spend it from the Limits they are given and stop
// when it runs out or its clock expires.
inline constexpr double kRetentionStepsPerUnit = 3.5e8;

// Fixed-order repair (the warm start of docs/solvers/checkmate.md): from `start`, while the
// simulated peak exceeds the budget, drop from S the value live at the peak's stage that removes
// the most memory above the budget per unit of added cost (each drop judged by simulating it).
// Returns the retention reached. `*cut_short` (when given) says whether `limits` ended it before a
// plan fitted. `max_evaluations` > 0 ends it after that many simulated drops.
Retention repair_retention(const Graph& graph, Retention start, int64_t budget_bytes,
                           Limits& limits, bool* cut_short = nullptr, int64_t max_evaluations = 0);
// Local search from a retention within budget: removes recomputations (their outputs held instead,
// the rest repaired back into the budget) while that lowers the cost, one at a time, then several
// at random (`seed`) until 200 tries in a row gain nothing. Returns the cheapest retention found;
// `start` unchanged when it is over budget. `*cut_short`: `limits` ended it.
Retention improve_retention(const Graph& graph, Retention start, int64_t budget_bytes,
                            Limits& limits, uint64_t seed, bool* cut_short = nullptr);

}  // namespace remat::checkmate
