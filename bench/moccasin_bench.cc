// moccasin_bench — the 18 cells of the MOCCASIN table (6 graphs × 90/80/70 %) solved
// by `moccasin`, printed beside the published MOCCASIN figures (CP-SAT, 16 cores, up to 1 h).
// Every figure comes from the simulator. Usage:
//   build/bench/moccasin_bench [--time-limit 60] [--only RL1,CM1] [--budgets 90,80] [--param
//   k=v]...
// `--param warm=none` runs without the warm start (default: checkmate-lp's plan, see the docs).
// REMAT_BENCH_DATA or ../shared/benchmarks/moccasin beside the repository holds the data.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
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
  const char* published;  // MOCCASIN CI / Mem / s, or "–"
};

constexpr Cell kCells[] = {
    {"RL1", "random_layered_n100_", 90, "0.8 / 88.1 / 9.3"},
    {"RL1", "random_layered_n100_", 80, "2.3 / 79.5 / 9.5"},
    {"RL1", "random_layered_n100_", 70, "–"},
    {"RL2", "random_layered_n250_", 90, "0.9 / 89.8 / 55.0"},
    {"RL2", "random_layered_n250_", 80, "4.9 / 80.0 / 639.5"},
    {"RL2", "random_layered_n250_", 70, "–"},
    {"RL3", "random_layered_n500_", 90, "0.7 / 90.0 / 1803.3"},
    {"RL3", "random_layered_n500_", 80, "3.4 / 80.0 / 1804.8"},
    {"RL3", "random_layered_n500_", 70, "–"},
    {"RL4", "random_layered_n1000_", 90, "0.7 / 90.0 / 3612.9"},
    {"RL4", "random_layered_n1000_", 80, "3.4 / 80.0 / 3611.8"},
    {"RL4", "random_layered_n1000_", 70, "–"},
    {"CM1", "fcn_8_vgg_32_416_608_3_train", 90, "0.0 / 88.4 / 3.1"},
    {"CM1", "fcn_8_vgg_32_416_608_3_train", 80, "0.1 / 78.9 / 3.1"},
    {"CM1", "fcn_8_vgg_32_416_608_3_train", 70, "–"},
    {"CM2", "ResNet50_256_224_224_3_train", 90, "0.2 / 89.9 / 65.2"},
    {"CM2", "ResNet50_256_224_224_3_train", 80, "0.3 / 80.0 / 69.3"},
    {"CM2", "ResNet50_256_224_224_3_train", 70, "–"},
};

// True when the comma-separated `list` names `item`.
bool listed(std::string_view list, std::string_view item) {
  size_t begin = 0;
  while (begin <= list.size()) {
    const size_t comma = std::min(list.find(',', begin), list.size());
    if (list.substr(begin, comma - begin) == item) return true;
    begin = comma + 1;
  }
  return false;
}

int run(int argc, char** argv) {
  double time_limit = 60;
  std::string only, budgets = "90,80,70";
  ParamMap params;
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
    } else if (arg == "--param") {
      const size_t eq = value.find('=');
      if (eq == std::string::npos) throw InputError("--param needs KEY=VALUE");
      params[value.substr(0, eq)] = value.substr(eq + 1);
    } else {
      throw InputError(fmt::format("unknown option '{}'", arg));
    }
  }
  const std::string dir = bench::moccasin_data_dir();
  if (!fs::exists(dir)) {
    fmt::print("moccasin_bench: data folder {} absent, nothing to do\n", dir);
    return 0;
  }
  // start: the warm start's CI % (`-` when over budget or none); best s: seconds to the returned
  // plan (the published times are time-to-best); from: which plan was returned.
  fmt::print(
      "{:<5} {:>3} | {:>7} {:>7} {:<12} {:>6} {:>6} | {:>7} {:<7} | published MOCCASIN CI / Mem / "
      "s\n",
      "graph", "B%", "CI %", "mem %", "status", "s", "best s", "start", "from");
  for (const Cell& cell : kCells) {
    if (!only.empty() && !listed(only, cell.graph)) continue;
    if (!listed(budgets, std::to_string(cell.budget_pct))) continue;
    const Graph g = read_graph_file(bench::find_data_file(dir, cell.prefix));
    const Baseline base = baseline(g);
    SolveOptions options;
    options.budget.bytes = static_cast<int64_t>(cell.budget_pct / 100.0 * base.peak_bytes);
    options.time_limit_s = time_limit;
    options.params = params;
    const SolveResult r = solve(g, "moccasin", options);
    const SolveStats& stats = r.plan.stats;
    std::string start = "-";
    if (stats.counter("start_cost") && *stats.counter("start_peak_bytes") <= options.budget.bytes)
      start = fmt::format("{:.2f}", 100.0 * (*stats.counter("start_cost") / base.cost - 1));
    const char* from = stats.counter("replaced_by_default_schedule")      ? "default"
                       : stats.counter("returned_start").value_or(0) == 1 ? "start"
                                                                          : "model";
    fmt::print("{:<5} {:>3} | {:>7.2f} {:>7.1f} {:<12} {:>6.1f} {:>6.1f} | {:>7} {:<7} | {}\n",
               cell.graph, cell.budget_pct, 100.0 * (r.eval.cost / base.cost - 1),
               100.0 * r.eval.peak_bytes / base.peak_bytes, to_string(stats.status),
               stats.wall_time_s, stats.counter("seconds_to_best").value_or(-1), start, from,
               cell.published);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return remat::bench::guarded_main(
      "moccasin_bench",
      "usage: build/bench/moccasin_bench [--time-limit 60] [--only RL1,CM1] [--budgets 90,80]\n"
      "         [--param KEY=VALUE]...\n",
      argc, argv, [&] { return run(argc, argv); });
}
