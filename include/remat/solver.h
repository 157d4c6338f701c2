// solver.h — the interface every solver implements, the registry, and the judged solve.
// A solver turns (graph, options) into a Plan. solve() below is how callers run one: it rejects
// budgets under the memory lower bound at once, runs the solver, re-simulates the sequence and
// sets the status from the simulator's peak, never from the solver's own estimate.
//   SolveOptions options;  options.budget = parse_budget("50%", baseline(g).peak_bytes);
//   SolveResult r = solve(g, "fastsa", options);
//   fmt::print("{} peak {} cost {}\n", to_string(r.plan.stats.status), r.eval.peak_bytes,
//   r.eval.cost);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remat/graph.h"
#include "remat/interrupt.h"
#include "remat/plan.h"
#include "remat/simulate.h"

namespace remat {

struct Budget {
  int64_t bytes = 0;
};

// "50%" (of `baseline_peak_bytes`), "123456", "90MB", "1.5GiB" (SI: KB MB GB TB; binary: KiB MiB
// GiB TiB). Throws InputError naming the text.
Budget parse_budget(std::string_view text, int64_t baseline_peak_bytes);
std::string format_bytes(int64_t bytes);

struct Progress {
  std::string_view stage;  // "stage 1", "dp", ...
  double fraction = -1;    // 0..1 when known, -1 otherwise
  int64_t iterations = 0;
  double best_objective = -1;  // solver-specific; -1 when none yet
  // The best plan so far in the simulator's units, when the solver tracks them; -1 otherwise.
  int64_t best_peak_bytes = -1;
  double best_cost = -1;
};

using ParamMap = std::map<std::string, std::string>;

// The most threads a solve may use: solvers run at most one worker per hardware thread, and more
// requested threads only add work that the time limit must cut short.
inline constexpr int kMaxThreads = 256;

struct SolveOptions {
  Budget budget;
  double time_limit_s = 60;
  uint64_t seed = 1;
  int threads = 1;  // 1..kMaxThreads
  ParamMap params;  // solver-specific, documented per solver
  std::function<void(const Progress&)> on_progress;
  // A plan to start the search from (a warm start, e.g. the best plan another solver found).
  // Empty: none. Only solvers whose accepts_start() is true take one; solve() rejects it for the
  // others and rejects a sequence the simulator finds invalid, so it is never silently ignored.
  Sequence start;
};

class Solver {
 public:
  virtual ~Solver() = default;
  virtual std::string_view name() const = 0;
  virtual Plan solve(const Graph& graph, const SolveOptions& options) = 0;
  // True when the solver starts from SolveOptions::start (see there).
  virtual bool accepts_start() const { return false; }
};

struct SolverEntry {
  std::string_view name;
  std::string_view description;
  std::unique_ptr<Solver> (*make)();
};
// Every registered solver, in registry order.
std::span<const SolverEntry> solver_registry();
// Throws InputError listing the known names.
std::unique_ptr<Solver> make_solver(std::string_view name);

struct SolveResult {
  Plan plan;
  Evaluation eval;  // the simulator's verdict on plan.sequence
};
// Runs the named solver and judges its plan (see the header comment). A budget below
// memory_lower_bound() returns the default schedule with status kInfeasible without solving.
SolveResult solve(const Graph& graph, std::string_view solver, const SolveOptions& options);

// Deadline helper for solvers honouring time_limit_s.
class Deadline {
 public:
  explicit Deadline(double seconds);
  // Also true once the run was interrupted (remat/interrupt.h: the CLI's first SIGINT).
  bool expired() const { return interrupt_requested() || std::chrono::steady_clock::now() >= end_; }
  double elapsed_s() const;

 private:
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point end_;
};

// Typed access to solver parameters; each throws InputError naming solver, key and text.
// check_known_params throws for a key not in `known`, listing the known ones.
void check_known_params(std::string_view solver, const ParamMap& params,
                        std::span<const std::string_view> known);
double param_double(std::string_view solver, const ParamMap& params, std::string_view key,
                    double fallback);
int64_t param_int(std::string_view solver, const ParamMap& params, std::string_view key,
                  int64_t fallback);
bool param_bool(std::string_view solver, const ParamMap& params, std::string_view key,
                bool fallback);
std::string param_string(const ParamMap& params, std::string_view key, std::string_view fallback);

// Seed for independent chain `index` derived from the user seed (SplitMix64).
uint64_t derive_seed(uint64_t seed, uint64_t index);

}  // namespace remat
