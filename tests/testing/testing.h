// testing.h — helpers shared by the C++ test suites.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "remat/error.h"
#include "remat/graph.h"
#include "remat/registry.h"

namespace remat::testing {

// Path of the MOCCASIN benchmark folder (REMAT_BENCH_DATA or ../shared/benchmarks/moccasin),
// or nullopt when it is absent (tests then GTEST_SKIP with a message, which ctest reports as a
// skip). With REMAT_REQUIRE_BENCH_DATA=1 an absent folder is a test failure instead, so a run that
// must cover the data cannot pass without it.
std::optional<std::string> bench_data_dir();
// The file of `dir` whose name starts with `prefix` ("random_layered_n100_").
std::string bench_file(const std::string& dir, std::string_view prefix);

// A graph from remat-graph JSON text (throws InputError if invalid).
Graph graph_from_json(std::string_view json_text);

// Solves through remat::solve and checks what every plan must satisfy: valid per the simulator,
// peak <= budget whenever the status claims feasible or optimal, cost >= cost lower bound. The
// work limit is kTestWorkLimit unless given: one unit, so a search that runs its whole share on a
// small problem (an annealing warm start) costs a fraction of a CPU second, not the default minute.
inline constexpr double kTestWorkLimit = 1;
SolveResult solve_and_check(const Graph& g, int64_t budget_bytes, std::string_view solver,
                            ParamMap params = {}, uint64_t seed = 1,
                            double work_limit = kTestWorkLimit);

// Solves twice through solve_and_check and expects the same plan for the same work: determinism
// on a graph larger than the registry property suite's.
void expect_same_plan_on_every_run(const Graph& g, int64_t budget_bytes, std::string_view solver);

// The message of the `Error` that `action` throws, or "no error".
template <class Error>
std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}
// The message of the InputError that `action` throws, or "no error".
std::string input_error_of(const std::function<void()>& action);

// How many times the node named `name` runs in `sequence`.
int count_runs(const Graph& g, const Sequence& sequence, std::string_view name);

// Runs the `remat` binary with `args` (a shell-quoted string); returns exit code and output.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
CommandResult run_remat(const std::string& args);

// A fresh empty temporary folder for one test.
std::string temp_dir(std::string_view test_name);
// Writes `text` to dir/name; returns the path.
std::string write_file(const std::string& dir, const std::string& name, const std::string& text);
// The whole file ("" when it cannot be read).
std::string read_file(const std::string& path);

// Keeps every hardware thread busy while it lives: a solve run beside it gets less of the CPU, as
// on a loaded machine, so its wall-clock limits fall at other points of its work than alone.
class BusyMachine {
 public:
  BusyMachine();
  ~BusyMachine();
  BusyMachine(const BusyMachine&) = delete;
  BusyMachine& operator=(const BusyMachine&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::jthread> spinners_;
};

}  // namespace remat::testing
