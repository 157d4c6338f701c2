#include "params.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>

#include "remat/error.h"

namespace remat::fastsa {
namespace {

constexpr std::string_view kSolver = "fastsa";
constexpr std::array<std::string_view, 21> kKnown = {
    "mode",
    "objective",
    "slots",
    "group_nodes",
    "max_group_size",
    "stage1_iterations",
    "stage2_iterations",
    "initial_temperature_pct",
    "final_temperature_pct",
    "stop_at_budget",
    "stage2_temperature",
    "carry_over_iterations",
    "stage2_keep_budget",
    "stage1_fallback",
    "rotation",
    "peak_tree",
    "logaddexp_peak",
    "iterations_scale",
    "schedule",
    "convergence_window",
    "init",
};

[[noreturn]] void bad(std::string_view key, std::string_view text, std::string_view expected) {
  throw InputError(fmt::format("{}: invalid value '{}' for parameter '{}' (expected {})", kSolver,
                               text, key, expected));
}

int64_t positive_int(const ParamMap& params, std::string_view key, int64_t fallback, int64_t min) {
  const int64_t x = param_int(kSolver, params, key, fallback);
  if (x < min) bad(key, param_string(params, key, ""), fmt::format("an integer >= {}", min));
  return x;
}

double positive_double(const ParamMap& params, std::string_view key, double fallback) {
  const double x = param_double(kSolver, params, key, fallback);
  if (!(x > 0)) bad(key, param_string(params, key, ""), "a number > 0");
  return x;
}

}  // namespace

FastsaParams parse_fastsa_params(const ParamMap& params) {
  check_known_params(kSolver, params, kKnown);
  FastsaParams p;
  const std::string mode = param_string(params, "mode", "recompute");
  if (mode == "recompute")
    p.mode = Mode::kRecompute;
  else if (mode == "order")
    p.mode = Mode::kOrder;
  else
    bad("mode", mode, "recompute or order");
  const std::string objective = param_string(params, "objective", "strict");
  if (objective == "strict")
    p.objective = Objective::kStrict;
  else if (objective == "product")
    p.objective = Objective::kProduct;
  else
    bad("objective", objective, "strict or product");
  p.slots = positive_int(params, "slots", 0, 0);
  if (p.slots != 0 &&
      (p.slots < 16 || p.slots > (int64_t{1} << 22) || (p.slots & (p.slots - 1)) != 0))
    bad("slots", param_string(params, "slots", ""), "0 or a power of two in [16, 2^22]");
  p.group_nodes = param_bool(kSolver, params, "group_nodes", p.group_nodes);
  p.max_group_size = static_cast<int32_t>(std::min<int64_t>(
      positive_int(params, "max_group_size", p.max_group_size, 0), int64_t{1} << 30));
  // iterations_scale multiplies both stage counts (quick runs: 0.1).
  const double scale = positive_double(params, "iterations_scale", 1.0);
  p.stage1_iterations = positive_int(params, "stage1_iterations", p.stage1_iterations, 0);
  p.stage2_iterations = positive_int(params, "stage2_iterations", p.stage2_iterations, 0);
  p.stage1_iterations = static_cast<int64_t>(static_cast<double>(p.stage1_iterations) * scale);
  p.stage2_iterations = static_cast<int64_t>(static_cast<double>(p.stage2_iterations) * scale);
  p.initial_temperature_pct =
      positive_double(params, "initial_temperature_pct", p.initial_temperature_pct);
  p.final_temperature_pct =
      positive_double(params, "final_temperature_pct", p.final_temperature_pct);
  p.stop_at_budget = param_bool(kSolver, params, "stop_at_budget", p.stop_at_budget);
  p.carry_over_iterations =
      param_bool(kSolver, params, "carry_over_iterations", p.carry_over_iterations);
  p.stage1_fallback = param_bool(kSolver, params, "stage1_fallback", p.stage1_fallback);
  p.stage2_keep_budget = param_bool(kSolver, params, "stage2_keep_budget", p.stage2_keep_budget);
  const std::string rotation = param_string(params, "rotation", "uniform");
  if (rotation == "local")
    p.local_rotations = true;
  else if (rotation != "uniform")
    bad("rotation", rotation, "uniform or local");
  const std::string start = param_string(params, "stage2_temperature", "stop");
  if (start == "stop")
    p.stage2_from_stop = true;
  else if (start == "final")
    p.stage2_from_stop = false;
  else
    bad("stage2_temperature", start, "stop or final");
  const std::string tree = param_string(params, "peak_tree", "max");
  if (tree == "max")
    p.logaddexp = false;
  else if (tree == "logaddexp")
    p.logaddexp = true;
  else
    bad("peak_tree", tree, "max or logaddexp");
  p.logaddexp_peak = positive_double(params, "logaddexp_peak", p.logaddexp_peak);
  const std::string schedule = param_string(params, "schedule", "converge");
  if (schedule == "converge")
    p.converge = true;
  else if (schedule == "fixed")
    p.converge = false;
  else
    bad("schedule", schedule, "converge or fixed");
  p.convergence_window = positive_int(params, "convergence_window", 0, 0);
  if (!p.converge && params.contains("convergence_window"))
    throw InputError(
        "fastsa: parameter 'convergence_window' needs schedule=converge (it has no effect with "
        "schedule=fixed)");
  p.init_plan_path = param_string(params, "init", "");
  if (params.contains("init") && p.init_plan_path.empty()) bad("init", "", "a plan JSON file");
  return p;
}

int64_t window_for(int64_t units) { return std::max<int64_t>(1'000'000, 500 * units); }

int32_t slots_for(int64_t units, int64_t requested) {
  constexpr int64_t kSlotsPerUnit = 16, kMin = int64_t{1} << 12, kMax = int64_t{1} << 20;
  int64_t want = requested > 0 ? requested : std::clamp(kSlotsPerUnit * units, kMin, kMax);
  want = std::max(want, 4 * units + 4);
  int64_t slots = 16;
  while (slots < want) slots *= 2;
  return static_cast<int32_t>(slots);
}

}  // namespace remat::fastsa
