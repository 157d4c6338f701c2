// rotor_recurrence_check — Theorem 4.7's recurrence exactly as printed, evaluated on random small
// integer chains, against `rotor --param persistence=weak --param bins=exact` (whose optimum the
// test suite checks against brute force over all sequences). Prints how often they agree, how
// often the printed recurrence is higher (it misses sequences: C(s,t,t) is ∞ for s < t) and how
// often lower (its m∅ does not count the kept a^{r-1} during the F_∅ after F_ck^r, so its value
// can belong to a sequence over the budget). Evidence for docs/solvers/rotor.md.
//   rotor_recurrence_check [chains] [max_length]
#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <tuple>

#include "bench_main.h"
#include "remat/generate.h"
#include "remat/registry.h"
#include "rotor_dp/chain_arrays.h"
#include "rotor_dp/dp_kernels.h"

namespace {

using namespace remat;
using namespace remat::rotor;

class PrintedRecurrence {
 public:
  explicit PrintedRecurrence(const ChainArrays<int64_t>& c) : c_(c) {}

  double solve(int64_t budget) { return value(1, 1, c_.n, budget - c_.a[0]); }

 private:
  int64_t m_none(int s, int l) const { return forward_none_memory(c_, s, l); }
  int64_t m_all(int s, int l) const { return forward_all_memory(c_, s, l); }

  double value(int s, int t, int l, int64_t m) {
    if (m < 0 || s > t || t > l) return kInfinity;
    const auto key = std::make_tuple(s, t, l, m);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    double best = kInfinity;
    if (s == t && t == l) {
      best = m >= m_all(s, s) ? c_.uf[s] + c_.ub[s] : kInfinity;  // Eq. (1)
    } else {
      if (m >= m_none(s, l) && t != l) {  // C_1
        for (int r = s; r <= t; ++r) {
          if (c_.a[s - 1] > c_.a[r - 1]) continue;
          for (int s2 = r + 1; s2 <= l; ++s2) {
            double forward = 0;
            for (int k = s; k < s2; ++k) forward += c_.uf[k];
            for (int t2 = std::max(s2, t + 1); t2 <= l; ++t2) {
              const double v = forward +
                               value(s2, t2, l, m - c_.a[s2 - 1] - c_.a[r - 1] + c_.a[s - 1]) +
                               value(r, t, t2 - 1, m - c_.a[r - 1] + c_.a[s - 1]);
              best = std::min(best, v);
            }
          }
        }
      }
      if (m >= m_all(s, l) && s == t)  // C_2
        best = std::min(best, c_.uf[s] + value(s + 1, s + 1, l, m - c_.abar[s]) + c_.ub[s]);
    }
    memo_[key] = best;
    return best;
  }

  const ChainArrays<int64_t>& c_;
  std::map<std::tuple<int, int, int, int64_t>, double> memo_;
};

}  // namespace

int run_bench(int argc, char** argv) {
  using remat::bench::number_argument;
  const int chains = argc > 1 ? number_argument<int>("CHAINS", argv[1]) : 500;
  const int max_length = argc > 2 ? number_argument<int>("MAX_LENGTH", argv[2]) : 6;
  int same = 0, higher = 0, lower = 0, cases = 0;
  for (int seed = 1; seed <= chains; ++seed) {
    const Chain chain = generate_chain({.kind = "random",
                                        .length = 1 + seed % max_length,
                                        .seed = static_cast<uint64_t>(seed),
                                        .max_size = 8,
                                        .max_time = 5});
    const ChainArrays<int64_t> arrays = chain_arrays(chain);
    const int64_t store_all = simulate_chain(chain, store_all_sequence(chain)).peak_bytes;
    for (int i = 1; i <= 4; ++i) {
      SolveOptions options;
      options.budget = {store_all * i / 4};
      options.params = {{"persistence", "weak"}, {"bins", "exact"}};
      const ChainSolveResult ours = solve(chain, "rotor", options);
      if (ours.eval.peak_bytes > options.budget.bytes) continue;  // infeasible budget
      const double printed = PrintedRecurrence(arrays).solve(options.budget.bytes);
      ++cases;
      if (printed == ours.eval.cost) {
        ++same;
        continue;
      }
      (printed > ours.eval.cost ? higher : lower) += 1;
      if (higher + lower <= 3)
        fmt::print("{} at budget {}: printed recurrence {}, ours {} ({})\n", chain.name,
                   options.budget.bytes, printed, ours.eval.cost,
                   format_sequence(ours.plan.sequence));
    }
  }
  fmt::print(
      "{} feasible cases on {} random chains (L = 1..{}): printed recurrence equal {}, "
      "higher {} (misses sequences), lower {} (over budget)\n",
      cases, chains, max_length, same, higher, lower);
  return 0;
}

int main(int argc, char** argv) {
  return remat::bench::guarded_main("rotor_recurrence_check",
                                    "usage: rotor_recurrence_check [CHAINS=500] [MAX_LENGTH=6]\n",
                                    argc, argv, [&] { return run_bench(argc, argv); });
}
