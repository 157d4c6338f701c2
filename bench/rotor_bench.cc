// rotor_bench — the Rotor DP timings, printed as a table.
//   persistent DP (Algorithm 3), ResNet-1001-like chain of length 339, 500 bins: bar < 0.3 s
//   weak DP (Algorithm 1), ResNet-like chains, L = 10, 20, 40, 80, 500 bins: bar L = 40 < 60 s
// Budgets: least + f * (store-all peak - least), where least is the smallest budget the DP can
// meet (stats.min_feasible_budget), so every run is feasible. Times are wall clock and CPU time of
// the solve (one thread); makespans and peaks come from the chain simulator.
//   rotor_bench [--weak-cap SECONDS] [--quick]
#include <fmt/format.h>

#include <cstring>
#include <ctime>
#include <string>

#include "bench_main.h"
#include "remat/generate.h"
#include "remat/registry.h"

namespace {

using namespace remat;

double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

// Solves at `budget`, or when it is 0 at least + fraction (store-all - least); returns the budget.
int64_t run(const Chain& chain, const std::string& label, double fraction, ParamMap params,
            double time_limit, int64_t budget = 0) {
  const int64_t store_all = simulate_chain(chain, store_all_sequence(chain)).peak_bytes;
  SolveOptions options;
  options.params = std::move(params);
  options.budget = {0};
  const int64_t least = *solve(chain, "rotor", options).plan.stats.min_feasible_budget;
  options.budget = {
      budget > 0 ? budget
                 : least + static_cast<int64_t>(static_cast<double>(store_all - least) * fraction)};
  options.time_limit_s = time_limit;
  const double cpu0 = cpu_seconds();
  const ChainSolveResult r = solve(chain, "rotor", options);
  const double cpu = cpu_seconds() - cpu0;
  const double store_all_makespan = simulate_chain(chain, store_all_sequence(chain)).cost;
  const bool timed_out = r.plan.stats.stop_reason == StopReason::kTimeLimit;
  fmt::print("{:<34} {:>4} {:>5.0f}% {:>7.1f}% {:>10.3f} {:>9.3f} {:>12} {:>9.2f}% {:>7.1f}%{}\n",
             label, chain.length(), 100 * fraction,
             100.0 * static_cast<double>(options.budget.bytes) / static_cast<double>(store_all),
             r.plan.stats.wall_time_s, cpu, to_string(r.plan.stats.status),
             100 * (r.eval.cost / store_all_makespan - 1),
             100.0 * static_cast<double>(r.eval.peak_bytes) / static_cast<double>(store_all),
             timed_out ? "  (timed out: fallback plan)" : "");
  std::fflush(stdout);
  return options.budget.bytes;
}

}  // namespace

int run_bench(int argc, char** argv) {
  double weak_cap = 600;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--weak-cap") == 0 && i + 1 < argc)
      weak_cap = remat::bench::number_argument<double>("--weak-cap", argv[++i]);
    else if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else
      throw remat::InputError(fmt::format("unknown argument '{}'", argv[i]));
  }
  fmt::print("{:<34} {:>4} {:>6} {:>8} {:>10} {:>9} {:>12} {:>10} {:>8}\n", "run", "L", "f",
             "budget", "wall s", "cpu s", "status", "overhead", "peak");
  fmt::print("(f: budget = least + f (store-all - least); budget and peak in % of store-all)\n");
  const Chain resnet1001 = generate_chain({.kind = "resnet", .length = 339, .batch = 8});
  for (double f : {0.1, 0.25, 0.5, 0.75, 0.9})
    run(resnet1001, "persistent, 500 bins (bar < 0.3 s)", f, {}, 600);
  for (int length : {10, 20, 40, 80}) {
    if (quick && length > 40) break;
    const Chain chain = generate_chain({.kind = "resnet", .length = length, .batch = 8});
    for (double f : {0.1, 0.5}) {
      const int64_t budget =
          run(chain, length == 40 ? "weak, 500 bins (bar < 60 s)" : "weak, 500 bins", f,
              {{"persistence", "weak"}}, weak_cap);
      run(chain, "  persistent, same budget", f, {}, 600, budget);  // §5.3: same in practice
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  return remat::bench::guarded_main("rotor_bench",
                                    "usage: rotor_bench [--weak-cap SECONDS] [--quick]\n", argc,
                                    argv, [&] { return run_bench(argc, argv); });
}
