#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

#include "remat/error.h"
#include "remat/graph.h"
#include "remat/solver.h"

namespace remat {
namespace {

struct Unit {
  std::string_view suffix;
  int64_t bytes;
};
// Longest suffixes first so "MiB" is not read as "B".
constexpr Unit kUnits[] = {{"KiB", int64_t{1} << 10},
                           {"MiB", int64_t{1} << 20},
                           {"GiB", int64_t{1} << 30},
                           {"TiB", int64_t{1} << 40},
                           {"KB", 1'000},
                           {"MB", 1'000'000},
                           {"GB", 1'000'000'000},
                           {"TB", 1'000'000'000'000},
                           {"B", 1}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A decimal number: digits, an optional fraction, an optional exponent ("12", "1.5", "2e9",
// "1e+20" as Python prints floats). No sign, hex, "inf" or "nan" (std::stod takes "0x10" as 16).
bool decimal_number(std::string_view s) {
  const size_t e = s.find_first_of("eE");
  const std::string_view mantissa = s.substr(0, e);
  const size_t dot = mantissa.find('.');
  const std::string_view whole = mantissa.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : mantissa.substr(dot + 1);
  if (whole.empty() && fraction.empty()) return false;
  if ((!whole.empty() && !all_digits(whole)) ||
      (dot != std::string_view::npos && !fraction.empty() && !all_digits(fraction)))
    return false;
  if (e == std::string_view::npos) return true;
  std::string_view exponent = s.substr(e + 1);
  if (!exponent.empty() && (exponent.front() == '+' || exponent.front() == '-'))
    exponent.remove_prefix(1);
  return all_digits(exponent);
}

[[noreturn]] void invalid_budget(std::string_view whole) {
  throw InputError(fmt::format(
      "invalid budget '{}' (expected a percentage of the baseline peak like '50%', or bytes "
      "like '123456', '90MB', '1.5GiB')",
      shorten(whole)));
}

// `bytes`: how many, when the text does not say it exactly ("1e+30 bytes, " for "1e30").
[[noreturn]] void above_limit(std::string_view whole, std::string_view bytes = {}) {
  throw InputError(
      fmt::format("budget '{}' is {}above the limit of 2^62 bytes ({}) that no graph can exceed",
                  shorten(whole), bytes, kMaxTotalBytes));
}

double parse_number(std::string_view number, std::string_view whole) {
  const std::string text(trim(number));
  if (!decimal_number(text)) invalid_budget(whole);
  const double x = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(x)) above_limit(whole);
  return x;
}

// Range-checks before converting: a double at or above 2^63 has no int64_t value.
Budget to_budget(double bytes, std::string_view whole) {
  const double floored = std::floor(bytes);
  if (!(floored <= static_cast<double>(kMaxTotalBytes)))
    above_limit(whole, fmt::format("{:.4g} bytes, ", floored));
  return {static_cast<int64_t>(floored)};
}

// Whole bytes times a unit, exactly (a double would read 2^62 + 1 as 2^62).
Budget exact_bytes(std::string_view digits, int64_t unit, std::string_view whole) {
  const auto scale = static_cast<unsigned __int128>(unit);
  unsigned __int128 bytes = 0;
  for (const char c : digits) {
    bytes = bytes * 10 + static_cast<unsigned>(c - '0');
    if (bytes * scale > kMaxTotalBytes) above_limit(whole);
  }
  return {static_cast<int64_t>(bytes * scale)};
}

Budget bytes_with_unit(std::string_view number, int64_t unit, std::string_view whole) {
  const std::string_view t = trim(number);
  if (all_digits(t)) return exact_bytes(t, unit, whole);
  return to_budget(parse_number(t, whole) * static_cast<double>(unit), whole);
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
      return bytes_with_unit(t.substr(0, t.size() - unit.suffix.size()), unit.bytes, text);
  return bytes_with_unit(t, 1, text);
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
