#include <fmt/format.h>

#include <cmath>
#include <string>

#include "remat/error.h"
#include "remat/solver.h"

namespace remat {
namespace {

const std::string* find_param(const ParamMap& params, std::string_view key) {
  auto it = params.find(std::string(key));
  return it == params.end() ? nullptr : &it->second;
}

[[noreturn]] void bad_param(std::string_view solver, std::string_view key, const std::string& text,
                            std::string_view expected) {
  throw InputError(fmt::format("{}: invalid value '{}' for parameter '{}' (expected {})", solver,
                               text, key, expected));
}

}  // namespace

void check_known_params(std::string_view solver, const ParamMap& params,
                        std::span<const std::string_view> known) {
  for (const auto& [key, text] : params) {
    bool found = false;
    for (std::string_view k : known) found = found || k == key;
    if (!found)
      throw InputError(fmt::format(
          "{}: unknown parameter '{}' (known: {})", solver, key,
          known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", "))));
  }
}

double param_double(std::string_view solver, const ParamMap& params, std::string_view key,
                    double fallback) {
  const std::string* text = find_param(params, key);
  if (text == nullptr) return fallback;
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(*text, &used);
  } catch (const std::exception&) {
    bad_param(solver, key, *text, "a number");
  }
  if (used != text->size() || !std::isfinite(x)) bad_param(solver, key, *text, "a number");
  return x;
}

int64_t param_int(std::string_view solver, const ParamMap& params, std::string_view key,
                  int64_t fallback) {
  const std::string* text = find_param(params, key);
  if (text == nullptr) return fallback;
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(*text, &used);
  } catch (const std::exception&) {
    bad_param(solver, key, *text, "an integer");
  }
  if (used != text->size()) bad_param(solver, key, *text, "an integer");
  return x;
}

bool param_bool(std::string_view solver, const ParamMap& params, std::string_view key,
                bool fallback) {
  const std::string* text = find_param(params, key);
  if (text == nullptr) return fallback;
  if (*text == "true" || *text == "1" || *text == "on" || *text == "yes") return true;
  if (*text == "false" || *text == "0" || *text == "off" || *text == "no") return false;
  bad_param(solver, key, *text, "true or false");
}

std::string param_string(const ParamMap& params, std::string_view key, std::string_view fallback) {
  const std::string* text = find_param(params, key);
  return text == nullptr ? std::string(fallback) : *text;
}

}  // namespace remat
