// checkmate_bench — the 18 cells of the MOCCASIN table (6 graphs × 90/80/70 %) solved
// by `checkmate` (the MILP on CBC) and `checkmate-lp` (LP relaxation with rounding), printed beside
// the published Checkmate MILP (Gurobi) and MOCCASIN (CP-SAT, 16 cores) figures, with the model
// size (rows, columns, non-zeros) to show where the MILP stops being practical. Every CI and
// memory figure comes from the simulator; the gap is (cost − lower bound) / cost. Usage:
//   build/bench/checkmate_bench [--time-limit 60] [--only RL1] [--budgets 90,80]
//                               [--solvers checkmate,checkmate-lp]
// REMAT_BENCH_DATA or ../shared/benchmarks/moccasin beside the repository holds the data.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bench_main.h"
#include "moccasin_data.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/registry.h"
#include "remat/simulate.h"

namespace fs = std::filesystem;
using namespace remat;

namespace {

struct Cell {
  const char* graph;
  const char* prefix;
  int budget_pct;
  const char* checkmate;  // published Checkmate MILP CI / Mem / s
  const char* moccasin;   // published MOCCASIN CI / Mem / s
};

constexpr Cell kCells[] = {
    {"RL1", "random_layered_n100_", 90, "0.8/89.2/18.5", "0.8/88.1/9.3"},
    {"RL1", "random_layered_n100_", 80, "2.3/79.5/22.7", "2.3/79.5/9.5"},
    {"RL1", "random_layered_n100_", 70, "–", "–"},
    {"RL2", "random_layered_n250_", 90, "0.9/90.0/685.1", "0.9/89.8/55.0"},
    {"RL2", "random_layered_n250_", 80, "time limit", "4.9/80.0/639.5"},
    {"RL2", "random_layered_n250_", 70, "–", "–"},
    {"RL3", "random_layered_n500_", 90, "time limit", "0.7/90.0/1803.3"},
    {"RL3", "random_layered_n500_", 80, "time limit", "3.4/80.0/1804.8"},
    {"RL3", "random_layered_n500_", 70, "–", "–"},
    {"RL4", "random_layered_n1000_", 90, "time limit", "0.7/90.0/3612.9"},
    {"RL4", "random_layered_n1000_", 80, "time limit", "3.4/80.0/3611.8"},
    {"RL4", "random_layered_n1000_", 70, "–", "–"},
    {"CM1", "fcn_8_vgg_32_416_608_3_train", 90, "0.0/88.4/6.3", "0.0/88.4/3.1"},
    {"CM1", "fcn_8_vgg_32_416_608_3_train", 80, "0.1/76.9/5.6", "0.1/78.9/3.1"},
    {"CM1", "fcn_8_vgg_32_416_608_3_train", 70, "–", "–"},
    {"CM2", "ResNet50_256_224_224_3_train", 90, "0.1/89.0/434.1", "0.2/89.9/65.2"},
    {"CM2", "ResNet50_256_224_224_3_train", 80, "0.3/79.7/485.3", "0.3/80.0/69.3"},
    {"CM2", "ResNet50_256_224_224_3_train", 70, "–", "–"},
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string counter_text(const SolveStats& stats, std::string_view name) {
  const std::optional<double> value = stats.counter(name);
  return value ? fmt::format("{:.0f}", *value) : "–";
}

void run_cell(const Cell& cell, const Graph& g, const std::string& solver, double time_limit) {
  const Baseline base = baseline(g);
  SolveOptions options;
  options.budget.bytes = static_cast<int64_t>(cell.budget_pct / 100.0 * base.peak_bytes);
  options.time_limit_s = time_limit;
  std::string ci = "–", mem = "–", status, gap = "–", seconds = "–", rows = "–", cols = "–",
              nnz = "–";
  try {
    const SolveResult r = solve(g, solver, options);
    const SolveStats& s = r.plan.stats;
    ci = fmt::format("{:.2f}", 100.0 * (r.eval.cost / base.cost - 1));
    mem = fmt::format("{:.1f}", 100.0 * r.eval.peak_bytes / base.peak_bytes);
    status = std::string(to_string(s.status));
    if (s.cost_lower_bound && r.eval.cost > 0)
      gap = fmt::format("{:.2f}", 100.0 * (r.eval.cost - *s.cost_lower_bound) / r.eval.cost);
    seconds = fmt::format("{:.1f}", s.wall_time_s);
    rows = counter_text(s, "rows");
    cols = counter_text(s, "columns");
    nnz = counter_text(s, "nonzeros");
  } catch (const InputError& e) {
    status = "refused";  // the size guard
    fmt::print(stderr, "{} {} %: {}\n", cell.graph, cell.budget_pct, e.what());
  }
  fmt::print(
      "{:<4} {:>3} {:<12} | {:>7} {:>6} {:<12} {:>6} {:>6} | {:>7} {:>7} {:>8} | {:<15} {}\n",
      cell.graph, cell.budget_pct, solver, ci, mem, status, gap, seconds, rows, cols, nnz,
      cell.checkmate, cell.moccasin);
  std::fflush(stdout);
}

int run(int argc, char** argv) {
  double time_limit = 60;
  std::string only, budgets = "90,80,70", solvers = "checkmate,checkmate-lp";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) throw InputError(fmt::format("'{}' needs a value", arg));
    const std::string value = argv[++i];
    if (arg == "--time-limit") {
      time_limit = std::stod(value);
    } else if (arg == "--only") {
      only = value;
    } else if (arg == "--budgets") {
      budgets = value;
    } else if (arg == "--solvers") {
      solvers = value;
    } else {
      throw InputError(fmt::format("unknown option '{}'", arg));
    }
  }
  const std::string dir = bench::moccasin_data_dir();
  if (!fs::exists(dir)) {
    fmt::print("checkmate_bench: data folder {} absent, nothing to do\n", dir);
    return 0;
  }
  fmt::print("time limit {} s per run; gap = (cost - proven lower bound) / cost\n", time_limit);
  fmt::print(
      "{:<4} {:>3} {:<12} | {:>7} {:>6} {:<12} {:>6} {:>6} | {:>7} {:>7} {:>8} | {:<15} {}\n",
      "graph", "B%", "solver", "CI %", "mem %", "status", "gap %", "s", "rows", "columns",
      "nonzeros", "Checkmate MILP", "MOCCASIN (published CI/Mem/s)");
  const std::vector<std::string> budget_list = split(budgets), only_list = split(only);
  for (const Cell& cell : kCells) {
    if (!only.empty() &&
        std::find(only_list.begin(), only_list.end(), cell.graph) == only_list.end())
      continue;
    if (std::find(budget_list.begin(), budget_list.end(), std::to_string(cell.budget_pct)) ==
        budget_list.end())
      continue;
    const Graph g = read_graph_file(bench::find_data_file(dir, cell.prefix));
    for (const std::string& solver : split(solvers)) run_cell(cell, g, solver, time_limit);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return remat::bench::guarded_main(
      "checkmate_bench",
      "usage: build/bench/checkmate_bench [--time-limit 60] [--only RL1] [--budgets 90,80]\n"
      "         [--solvers checkmate,checkmate-lp]\n",
      argc, argv, [&] { return run(argc, argv); });
}
