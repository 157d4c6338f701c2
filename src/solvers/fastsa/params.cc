#include "params.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string_view>

#include "remat/error.h"

namespace remat::fastsa {
namespace {

// slots: 0 (auto) or a power of two in [16, 2^22].
void set_slots(FastsaParams& p, const std::string& text) {
  const BadParamValue bad{"0 or a power of two in [16, 2^22]"};
  int64_t slots = 0;
  try {
    slots = parse_int_text(text);
  } catch (const BadParamValue&) {
    throw bad;
  }
  if (slots != 0 && (slots < 16 || slots > (int64_t{1} << 22) || (slots & (slots - 1)) != 0))
    throw bad;
  p.slots = slots;
}

}  // namespace

const ParamTable<FastsaParams>& fastsa_param_table() {
  using P = FastsaParams;
  static const ParamTable<P> table(
      "fastsa",
      {
          {{"mode", "`recompute`", "",
            "`recompute` (two stages, add / remove / rotate), `order` (rotations only, "
            "objective M, one stage of `stage1_iterations`) or `fixed-order` (two stages of adds "
            "and removes on single nodes; first computations keep the default order)"},
           choice(&P::mode, {{"recompute", Mode::kRecompute},
                             {"order", Mode::kOrder},
                             {"fixed-order", Mode::kFixedOrder}})},
          {{"objective", "`strict`", "",
            "`strict`: `L(Elu(L⁻¹(M))) × C^0.6` with `L(0) = budget`, `L(−100) = 0` (footnote 2, "
            "used for the paper's Tables 1–2); `product`: `max(budget, M) × C` (equation 1)"},
           choice(&P::objective,
                  {{"strict", Objective::kStrict}, {"product", Objective::kProduct}})},
          {{"stage1_iterations", "20,000,000", "iterations",
            "stage 1 iterations at most (App. D.4); stops earlier at the budget"},
           integer(&P::stage1_iterations, 0)},
          {{"stage2_iterations", "2,000,000", "iterations",
            "stage 2 iterations (App. D.4), plus what stage 1 left unused when "
            "`carry_over_iterations`"},
           integer(&P::stage2_iterations, 0)},
          {{"carry_over_iterations", "`true`", "",
            "a run is at most `stage1 + stage2` iterations (22 M)"},
           flag(&P::carry_over_iterations)},
          {{"iterations_scale", "1", "factor", "multiplies both counts (quick runs)"},
           real(&P::iterations_scale, 0.0, std::numeric_limits<double>::infinity(), true)},
          {{"initial_temperature_pct", "0.1", "%",
            "stage 1 initial temperature, % of the initial objective (App. D.4)"},
           real(&P::initial_temperature_pct, 0.0, std::numeric_limits<double>::infinity(), true)},
          {{"final_temperature_pct", "0.01", "%",
            "each stage's final temperature, % of its initial one (App. D.4)"},
           real(&P::final_temperature_pct, 0.0, std::numeric_limits<double>::infinity(), true)},
          {{"stage2_temperature", "`stop`", "",
            "stage 2 starts at the temperature where stage 1 stopped (`stop`) or at stage 1's "
            "scheduled final temperature (`final`)"},
           choice(&P::stage2_from_stop, {{"stop", true}, {"final", false}})},
          {{"stop_at_budget", "`true`", "", "stage 1 stops once the budget is met (§3.1)"},
           flag(&P::stop_at_budget)},
          {{"stage1_fallback", "`true`", "",
            "groups get half of stage 1; if they do not reach the budget, single nodes get the "
            "other half"},
           flag(&P::stage1_fallback)},
          {{"stage1_fallback_windows", "2", "windows",
            "after a memory pass, the single nodes run at most this many convergence windows "
            "(their plan counts only if it fits); 0 = no cap"},
           integer(&P::stage1_fallback_windows, 0, int64_t{1} << 20)},
          {{"stage1_memory_pass", "`true`", "",
            "before the single nodes, the groups anneal on for memory alone (cost exponent 0) "
            "from their plan; stage 2 starts from its plan if it fits and the single nodes' "
            "does not, or if nothing fits and its peak is clearly lower"},
           flag(&P::stage1_memory_pass)},
          {{"memory_pass_peak_moves", "0.3", "share",
            "the share of the memory pass's proposals drawn around the current peak slot: a "
            "recomputation of a value live across the peak between the peak and a use of it "
            "after the peak (0: all uniform, §2.2)"},
           real(&P::memory_pass_peak_moves, 0.0, 1.0)},
          {{"group_nodes", "`true`", "",
            "Algorithm 1 before stage 1 (`false`: stage 1 on single nodes)"},
           flag(&P::group_nodes)},
          {{"max_group_size", "64", "nodes", "most nodes in one group; 0 = no limit"},
           integer(&P::max_group_size, 0, int64_t{1} << 30)},
          {{"slots", "0 (auto)", "slots",
            "state length T (a power of two, 16 … 2^22). Auto: 16 slots per unit, at least 2^12, "
            "at most 2^20 (App. D.4 fixes 2^20; a smaller tree stays in cache: 1.5× faster on "
            "6,000 nodes, same Table 1 figures); always at least 4 × the units placed"},
           set_slots},
          {{"rotation", "`uniform`", "",
            "rotation targets anywhere (§2.2) or `local`: within the unit's valid range (more "
            "valid moves; on the MOCCASIN graphs no better plans and several times slower)"},
           choice(&P::local_rotations, {{"uniform", false}, {"local", true}})},
          {{"stage2_keep_budget", "`true`", "",
            "once stage 2 is within budget it rejects every move that would leave it (the "
            "objective is continuous at the budget and otherwise trades a little memory for "
            "cost, so the best feasible plan could stop improving)"},
           flag(&P::stage2_keep_budget)},
          {{"schedule", "`converge`", "",
            "`converge`: stop a stage after `convergence_window` iterations without improvement; "
            "`fixed`: the paper's iteration counts to the end"},
           choice(&P::converge, {{"converge", true}, {"fixed", false}})},
          {{"convergence_window", "0 (auto)", "iterations",
            "iterations without a new best plan or objective that end a stage; auto: 4,000 × "
            "units within [100 k, 1 M], or 500 × units when more"},
           integer(&P::convergence_window, 0)},
          {{"peak_tree", "`max`", "",
            "`logaddexp`: the objective uses the log-add-exp smooth peak (App. C.2); the max tree "
            "is kept beside it for the true peak"},
           choice(&P::logaddexp, {{"max", false}, {"logaddexp", true}})},
          {{"logaddexp_peak", "10", "", "the baseline peak in the scaled units (App. C.2)"},
           real(&P::logaddexp_peak, 0.0, std::numeric_limits<double>::infinity(), true)},
      });
  return table;
}

FastsaParams parse_fastsa_params(const ParamMap& params) {
  FastsaParams p = fastsa_param_table().parse(params);
  p.stage1_iterations =
      static_cast<int64_t>(static_cast<double>(p.stage1_iterations) * p.iterations_scale);
  p.stage2_iterations =
      static_cast<int64_t>(static_cast<double>(p.stage2_iterations) * p.iterations_scale);
  p.iterations_scale = 1;  // applied
  if (!p.converge && params.contains("convergence_window"))
    throw InputError(
        "fastsa: parameter 'convergence_window' needs schedule=converge (it has no effect with "
        "schedule=fixed)");
  return p;
}

int64_t window_for(int64_t units) {
  return std::max(std::clamp<int64_t>(4'000 * units, 100'000, 1'000'000), 500 * units);
}

int32_t slots_for(int64_t units, int64_t requested) {
  constexpr int64_t kSlotsPerUnit = 16, kMin = int64_t{1} << 12, kMax = int64_t{1} << 20;
  int64_t want = requested > 0 ? requested : std::clamp(kSlotsPerUnit * units, kMin, kMax);
  want = std::max(want, 4 * units + 4);
  int64_t slots = 16;
  while (slots < want) slots *= 2;
  return static_cast<int32_t>(slots);
}

}  // namespace remat::fastsa
