#include "remat/plan.h"

namespace remat {
namespace {
constexpr std::string_view kStatusNames[] = {"optimal", "feasible", "over-budget", "infeasible"};
constexpr std::string_view kStopNames[] = {"converged", "work_limit", "time_limit", "interrupted"};
}  // namespace

std::string_view to_string(SolveStatus status) { return kStatusNames[static_cast<int>(status)]; }

std::optional<SolveStatus> parse_solve_status(std::string_view text) {
  for (size_t i = 0; i < std::size(kStatusNames); ++i)
    if (kStatusNames[i] == text) return static_cast<SolveStatus>(i);
  return std::nullopt;
}

std::string_view to_string(StopReason reason) { return kStopNames[static_cast<int>(reason)]; }

std::optional<StopReason> parse_stop_reason(std::string_view text) {
  for (size_t i = 0; i < std::size(kStopNames); ++i)
    if (kStopNames[i] == text) return static_cast<StopReason>(i);
  return std::nullopt;
}

std::optional<double> SolveStats::counter(std::string_view name) const {
  for (const auto& [key, value] : counters)
    if (key == name) return value;
  return std::nullopt;
}

}  // namespace remat
