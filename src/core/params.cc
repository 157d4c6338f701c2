#include "remat/params.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "remat/error.h"

namespace remat {
void throw_bad_param(std::string_view solver, std::string_view key, std::string_view text,
                     std::string_view expected) {
  throw InputError(fmt::format("{}: invalid value '{}' for parameter '{}' (expected {})", solver,
                               text, key, expected));
}

void throw_unknown_param(std::string_view solver, std::string_view key,
                         std::span<const ParamInfo> known) {
  std::vector<std::string_view> keys;
  for (const ParamInfo& p : known) keys.push_back(p.key);
  throw InputError(
      fmt::format("{}: unknown parameter '{}' (known: {})", solver, key,
                  keys.empty() ? std::string("none") : fmt::format("{}", fmt::join(keys, ", "))));
}

int64_t parse_int_text(const std::string& text) {
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(text, &used);
  } catch (const std::exception&) {
    throw BadParamValue{"an integer"};
  }
  if (used != text.size()) throw BadParamValue{"an integer"};
  return x;
}

double parse_real_text(const std::string& text) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(text, &used);
  } catch (const std::exception&) {
    throw BadParamValue{"a number"};
  }
  if (used != text.size() || !std::isfinite(x)) throw BadParamValue{"a number"};
  return x;
}

bool parse_flag_text(const std::string& text) {
  if (text == "true" || text == "1" || text == "on" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "off" || text == "no") return false;
  throw BadParamValue{"true or false"};
}

std::string params_markdown(std::span<const ParamInfo> params) {
  std::string out = "| key | default | unit | meaning |\n| --- | --- | --- | --- |\n";
  for (const ParamInfo& p : params)
    out += fmt::format("| `{}` | {} | {} | {} |\n", p.key,
                       p.default_text.empty() ? "—" : p.default_text, p.unit.empty() ? "—" : p.unit,
                       p.doc);
  return out;
}

std::string params_help(std::span<const ParamInfo> params, std::string_view indent) {
  if (params.empty()) return fmt::format("{}(none)", indent);
  size_t width = 0;
  for (const ParamInfo& p : params) width = std::max(width, p.key.size() + p.default_text.size());
  std::string out;
  for (const ParamInfo& p : params) {
    std::string head = fmt::format("{}={}", p.key, p.default_text);
    std::erase(head, '`');  // Markdown quoting, for the docs table only
    out += fmt::format("{}{}{:<{}}  {}{}", out.empty() ? "" : "\n", indent, head, width + 1, p.doc,
                       p.unit.empty() ? "" : fmt::format(" [{}]", p.unit));
  }
  return out;
}

}  // namespace remat
