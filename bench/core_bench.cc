// core_bench — the core's bars (issue 2):
//   simulating a 1,000,000-step sequence on a 10,000-node generated graph: under 0.5 s;
//   loading the 1000-node RL graph and printing `remat info`: under 0.1 s.
// Prints the median of several repetitions. Run: ./build/bench/core_bench
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <vector>

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

}  // namespace

int main() {
  bench_simulate();
  bench_info();
  return 0;
}
