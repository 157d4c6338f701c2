// core_bench — the core's bars:
//   simulating a 1,000,000-step sequence on a 10,000-node generated graph: under 0.5 s;
//   loading the 1000-node RL graph and printing `remat info`: under 0.1 s;
//   `remat info` on a ~240 MB generated graph: goal <= 3 s and peak RSS <= 4x the file.
// Prints the median of several repetitions. Run: ./build/bench/core_bench
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <vector>

#include "bench_main.h"
#include "remat/generate.h"
#include "remat/io.h"
#include "remat/random.h"
#include "remat/simulate.h"
#include "timing.h"

namespace {

using remat::bench::median_seconds;

// The default schedule with copies of earlier nodes inserted until `steps` long; always valid,
// since every input of an earlier node was produced before that node first ran.
remat::Sequence long_sequence(const remat::Graph& g, size_t steps, uint64_t seed) {
  remat::Rng rng(seed);
  const auto n = static_cast<size_t>(g.num_nodes());
  const double extra_per_node = static_cast<double>(steps - n) / static_cast<double>(n);
  remat::Sequence seq;
  seq.reserve(steps);
  for (size_t i = 0; i < n; ++i) {
    const size_t copies = i == 0 ? 0 : static_cast<size_t>(extra_per_node + rng.uniform());
    for (size_t c = 0; c < copies && seq.size() + (n - i) < steps; ++c)
      seq.push_back(remat::NodeId{static_cast<int32_t>(rng.below(i))});
    seq.push_back(remat::NodeId{static_cast<int32_t>(i)});
  }
  while (seq.size() < steps) seq.push_back(remat::NodeId{static_cast<int32_t>(rng.below(n))});
  return seq;
}

void bench_simulate() {
  const remat::Graph g = remat::generate_random_layered({.num_nodes = 10'000, .seed = 1});
  const remat::Sequence seq = long_sequence(g, 1'000'000, 2);
  remat::Evaluation e;
  const double plain = median_seconds(5, [&] { e = remat::simulate(g, seq); });
  const double with_timeline =
      median_seconds(5, [&] { e = remat::simulate(g, seq, {.timeline = true}); });
  fmt::print("simulate: {} nodes, {} edges, {} steps (valid: {}, peak {})\n", g.num_nodes(),
             g.total_input_count(), seq.size(), e.valid, e.peak_bytes);
  fmt::print("  peak and cost          {:8.3f} s   (bar: < 0.5 s) {}\n", plain,
             plain < 0.5 ? "ok" : "MISSED");
  fmt::print("  with the full timeline {:8.3f} s\n", with_timeline);
}

void bench_info() {
  const char* env = std::getenv("REMAT_BENCH_DATA");
  const std::filesystem::path dir =
      env != nullptr ? env
                     : std::filesystem::path(REMAT_SOURCE_DIR) / "../shared/benchmarks/moccasin";
  const auto file = dir / "random_layered_n1000_w0.31_nlv0.75_ed0.2_scd0.14.json";
  if (!std::filesystem::exists(file)) {
    fmt::print("info: skipped, {} not found (set REMAT_BENCH_DATA)\n", file.string());
    return;
  }
  const double in_process = median_seconds(9, [&] {
    const remat::Graph g = remat::read_graph_file(file.string());
    (void)remat::baseline(g);
    (void)remat::memory_lower_bound(g);
    (void)remat::cost_lower_bound(g);
  });
  const std::string command = fmt::format("{} info {} >/dev/null", REMAT_BINARY, file.string());
  const double whole_command = median_seconds(9, [&] {
    if (std::system(command.c_str()) != 0) fmt::print("  remat info failed\n");
  });
  fmt::print("info: RL 1000 ({})\n", file.filename().string());
  fmt::print("  load + baseline + bounds  {:8.4f} s\n", in_process);
  fmt::print("  `remat info` process      {:8.4f} s   (bar: < 0.1 s) {}\n", whole_command,
             whole_command < 0.1 ? "ok" : "MISSED");
}

// Runs `remat info FILE` (stdout to /dev/null) as a spawned child; returns its wall and CPU
// seconds and peak RSS in MB. posix_spawn, not system(): a forked child would start with this
// process's pages counted in its RSS.
struct ProcessFigures {
  double wall_s, cpu_s, rss_mb;
};

ProcessFigures measure_info_process(const std::string& file) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  std::string binary = REMAT_BINARY, info = "info", path = file;
  char* argv[] = {binary.data(), info.data(), path.data(), nullptr};
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv, environ) != 0) return {-1, -1, -1};
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  posix_spawn_file_actions_destroy(&actions);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fmt::print("  remat info failed\n");
  const auto to_s = [](timeval t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return {seconds, to_s(usage.ru_utime) + to_s(usage.ru_stime),
          static_cast<double>(usage.ru_maxrss) / 1e3};  // ru_maxrss is in KiB
}

// A generated graph of 230,000 nodes (~240 MB of JSON, 16.8 million edges), written once, then
// one `remat info` process: its wall time and peak RSS against the file size.
void bench_info_large() {
  const auto file = std::filesystem::temp_directory_path() / "remat_core_bench_230k.json";
  if (!std::filesystem::exists(file))
    remat::write_graph_file(file.string(),
                            remat::generate_random_layered({.num_nodes = 230'000, .seed = 1}));
  const double mb = static_cast<double>(std::filesystem::file_size(file)) / 1e6;
  const auto [seconds, cpu_s, rss_mb] = measure_info_process(file.string());
  fmt::print("info: generated graph of {:.0f} MB ({})\n", mb, file.string());
  fmt::print("  `remat info` process      {:8.2f} s   (goal: <= 3 s) {}\n", seconds,
             seconds <= 3 ? "ok" : "MISSED");
  fmt::print("  its CPU time (user + sys) {:8.2f} s   (wall minus waiting on a loaded machine)\n",
             cpu_s);
  fmt::print("  peak RSS {:.0f} MB = {:.2f}x the file   (goal: <= 4x) {}\n", rss_mb, rss_mb / mb,
             rss_mb <= 4 * mb ? "ok" : "MISSED");
}

}  // namespace

int main(int argc, char** argv) {
  return remat::bench::guarded_main("core_bench", "usage: ./build/bench/core_bench\n", argc, argv,
                                    [] {
                                      bench_simulate();
                                      bench_info();
                                      bench_info_large();
                                      return 0;
                                    });
}
