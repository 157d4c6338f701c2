// common.h — pieces shared by the subcommands of the `remat` command (src/cli/).
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "remat/graph.h"
#include "remat/registry.h"

namespace remat::cli {

// One register_* per subcommand file: adds the subcommand and its callback to `app`.
void register_info(CLI::App& app);
void register_solve(CLI::App& app);
void register_simulate(CLI::App& app);
void register_compare(CLI::App& app);
void register_convert(CLI::App& app);
void register_gen(CLI::App& app);
void register_sweep(CLI::App& app);

// Options every solving subcommand shares. --work-limit is the deterministic stop (work units,
// remat/solver.h); --time-limit the wall-clock backstop, by default backstop_time_limit(work).
struct SolverArgs {
  double work_limit = kDefaultWorkLimit;
  std::optional<double> time_limit_s;
  uint64_t seed = 1;
  int threads = 1;
  std::vector<std::string> params;  // "key=value"
};
void add_solver_options(CLI::App& command, SolverArgs& args);
// The parameters for `solver`: "KEY=VALUE" applies to every solver, "SOLVER.KEY=VALUE" only to
// that one (so `compare --solvers rotor,sequential --param rotor.bins=exact` works); a solver whose
// row forwards member parameters (auto) also keeps MEMBER.KEY. Throws InputError for an entry
// without '='.
ParamMap parse_params(const std::vector<std::string>& entries, std::string_view solver);
// Throws InputError for a "SOLVER.KEY=VALUE" whose SOLVER is not one of `solvers` (the command's)
// nor a portfolio member of one that forwards member parameters: a parameter for a solver that
// does not run is never dropped in silence.
void check_param_scopes(const std::vector<std::string>& entries,
                        std::span<const std::string> solvers);
SolveOptions make_solve_options(const SolverArgs& args, Budget budget, std::string_view solver);

// Writes to `path` atomically, or to stdout when `path` is empty or "-". A failed write to
// stdout (a full disk, /dev/full) is an InputError naming it.
void emit(const std::string& text, const std::string& path);

// Output file options (-o, --plot): an empty name is refused, not taken as "not given".
CLI::Validator output_path_validator();
// True when `path` is "-" or names the file standard output writes to (/dev/stdout).
bool is_standard_output(const std::string& path);
// Throws InputError when `output` names the existing file `input` (the graph would be replaced by
// what is written, a plan or a plot); `what` names the output ("the plan").
void refuse_overwriting_input(const std::string& output, const std::string& input,
                              std::string_view what);

// part / whole in % (0 when whole is 0); divides first, so parts near the largest double do not
// overflow to inf%.
double percent(double part, double whole);
// (cost − lower bound) / cost in %, the MILP solvers' gap: 0 when the bound is reached.
double gap_percent(double cost, double lower_bound);

// `text` made safe inside XML/SVG/HTML text or a quoted attribute: & < > " ' become entities and
// control characters XML forbids become '?', so a node named "</text><script>" stays text.
std::string xml_escape(std::string_view text);

// A progress line on stderr, drawn only when stderr is a terminal and the work has already taken
// more than a second; cleared when destroyed. Safe to call from several solver threads.
class ProgressBar {
 public:
  explicit ProgressBar(std::string label);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  void update(const Progress& progress);
  std::function<void(const Progress&)> callback();

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  // The last best plan reported (auto's portfolio reports each new one once): kept for every
  // later line, as reports between two draws are not drawn.
  int64_t best_peak_bytes_ = -1;
  double best_cost_ = -1;
  std::mutex mutex_;
};

}  // namespace remat::cli

namespace remat::cli {

// A plain text table: left-aligned first column, right-aligned others.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string str() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace remat::cli
