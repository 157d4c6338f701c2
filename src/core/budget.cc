#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <string>

#include "remat/error.h"
#include "remat/graph.h"
#include "remat/solver.h"

namespace remat {
namespace {

struct Unit {
  std::string_view suffix;
  double bytes;
};
// Longest suffixes first so "MiB" is not read as "B".
constexpr Unit kUnits[] = {
    {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},           {"TB", 1e12},
    {"B", 1.0}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

double parse_number(std::string_view number, std::string_view whole) {
  const std::string text(trim(number));
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !std::isfinite(x) || x < 0)
    throw InputError(fmt::format(
        "invalid budget '{}' (expected a percentage of the baseline peak like '50%', or bytes "
        "like '123456', '90MB', '1.5GiB')",
        shorten(whole)));
  return x;
}

// Range-checks before converting: a double at or above 2^63 has no int64_t value.
Budget to_budget(double bytes, std::string_view whole) {
  const double floored = std::floor(bytes);
  if (!(floored <= static_cast<double>(kMaxTotalBytes)))
    throw InputError(fmt::format(
        "budget '{}' is {:.4g} bytes, above the limit of 2^62 bytes ({}) that no graph can exceed",
        shorten(whole), floored, kMaxTotalBytes));
  return {static_cast<int64_t>(floored)};
}

// ⌊pct % × baseline⌋ exactly when pct has at most six decimals (every budget people type), so 100%
// is the baseline itself even where doubles cannot hold the bytes; otherwise in double.
Budget percent_of(double pct, int64_t baseline_peak_bytes, std::string_view whole) {
  const double millionths = std::round(pct * 1e6);
  if (millionths <= 1e15 && std::abs(millionths - pct * 1e6) < 1e-6 * std::max(1.0, millionths)) {
    const __int128 bytes =
        static_cast<__int128>(baseline_peak_bytes) * static_cast<int64_t>(millionths) / 100'000'000;
    if (bytes <= kMaxTotalBytes) return {static_cast<int64_t>(bytes)};
  }
  return to_budget(pct / 100.0 * static_cast<double>(baseline_peak_bytes), whole);
}

}  // namespace

Budget parse_budget(std::string_view text, int64_t baseline_peak_bytes) {
  const std::string_view t = trim(text);
  if (!t.empty() && t.back() == '%') {
    const double pct = parse_number(t.substr(0, t.size() - 1), text);
    return percent_of(pct, baseline_peak_bytes, text);
  }
  for (const Unit& unit : kUnits)
    if (t.size() > unit.suffix.size() && t.ends_with(unit.suffix))
      return to_budget(parse_number(t.substr(0, t.size() - unit.suffix.size()), text) * unit.bytes,
                       text);
  return to_budget(parse_number(t, text), text);
}

std::string format_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (std::abs(b) >= 1e12) return fmt::format("{:.2f} TB", b / 1e12);
  if (std::abs(b) >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (std::abs(b) >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
  if (std::abs(b) >= 1e3) return fmt::format("{:.2f} KB", b / 1e3);
  return fmt::format("{} B", bytes);
}

}  // namespace remat
