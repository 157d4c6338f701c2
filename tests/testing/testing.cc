#include "testing/testing.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "remat/error.h"
#include "remat/io.h"
#include "remat/simulate.h"

namespace remat::testing {
namespace fs = std::filesystem;

std::optional<std::string> bench_data_dir() {
  const char* env = std::getenv("REMAT_BENCH_DATA");
  const fs::path dir =
      env != nullptr ? fs::path(env)
                     : fs::path(REMAT_SOURCE_DIR) / ".." / "shared" / "benchmarks" / "moccasin";
  if (fs::is_directory(dir)) return dir.string();
  const char* require = std::getenv("REMAT_REQUIRE_BENCH_DATA");
  if (require != nullptr && std::string_view(require) == "1")
    ADD_FAILURE() << "MOCCASIN data absent at " << dir.string()
                  << " and REMAT_REQUIRE_BENCH_DATA=1 (set REMAT_BENCH_DATA to its folder)";
  return std::nullopt;
}

std::string bench_file(const std::string& dir, std::string_view prefix) {
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().starts_with(prefix)) return entry.path().string();
  ADD_FAILURE() << "no file starting with " << prefix << " in " << dir;
  return {};
}

Graph graph_from_json(std::string_view json_text) { return parse_graph_json(json_text, "test"); }

SolveResult solve_and_check(const Graph& g, int64_t budget_bytes, std::string_view solver,
                            ParamMap params, uint64_t seed, double work_limit) {
  SolveOptions options;
  options.budget = Budget{budget_bytes};
  options.params = std::move(params);
  options.seed = seed;
  options.work_limit = work_limit;
  options.time_limit_s = backstop_time_limit(work_limit);
  SolveResult r = solve(g, solver, options);
  const Evaluation e = simulate(g, r.plan.sequence);
  EXPECT_TRUE(e.valid) << e.error;
  EXPECT_EQ(e.peak_bytes, r.eval.peak_bytes);
  const SolveStatus status = r.plan.stats.status;
  if (status == SolveStatus::kFeasible || status == SolveStatus::kOptimal) {
    EXPECT_LE(e.peak_bytes, budget_bytes) << solver << " claims " << to_string(status);
  }
  EXPECT_GE(e.cost, cost_lower_bound(g) * (1 - 1e-12));
  return r;
}

void expect_same_plan_on_every_run(const Graph& g, int64_t budget_bytes, std::string_view solver) {
  const SolveResult a = solve_and_check(g, budget_bytes, solver);
  const SolveResult b = solve_and_check(g, budget_bytes, solver);
  EXPECT_EQ(a.plan.sequence, b.plan.sequence) << solver;
  EXPECT_EQ(a.plan.stats.work, b.plan.stats.work) << solver;
}

std::string input_error_of(const std::function<void()>& action) {
  return error_of<InputError>(action);
}

int count_runs(const Graph& g, const Sequence& sequence, std::string_view name) {
  int runs = 0;
  for (NodeId n : sequence) runs += g.node(n).name == name;
  return runs;
}

CommandResult run_remat(const std::string& args) {
  static int counter = 0;
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("remat_cmd_{}_{}", ::getpid(), counter++);
  fs::create_directories(dir);
  const std::string out_path = (dir / "out").string(), err_path = (dir / "err").string();
  const std::string command =
      fmt::format("{} {} >{} 2>{} </dev/null", REMAT_BINARY, args, out_path, err_path);
  const int status = std::system(command.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  fs::remove_all(dir);
  return r;
}

std::string write_file(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string temp_dir(std::string_view test_name) {
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("remat_test_{}_{}", test_name, ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

BusyMachine::BusyMachine() {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < threads; ++i)
    spinners_.emplace_back([this] {
      volatile uint64_t x = 1;
      while (!stop_.load(std::memory_order_relaxed)) x = x * 6364136223846793005u + 1;
    });
}

BusyMachine::~BusyMachine() { stop_ = true; }

}  // namespace remat::testing
