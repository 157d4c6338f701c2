#include "json_util.h"

namespace remat::io {
namespace {

// 1-based line and column of a byte offset.
std::pair<size_t, size_t> line_column(std::string_view text, size_t byte) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < std::min(byte, text.size()); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

}  // namespace

json parse_json(std::string_view text, std::string_view source) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    const size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    const auto [line, column] = line_column(text, byte);
    std::string reason = e.what();
    // Drop nlohmann's "[json.exception...] parse error at line L, column C: " prefix.
    const size_t colon = reason.find(": ", reason.find("column"));
    if (colon != std::string::npos) reason = reason.substr(colon + 2);
    throw InputError(fmt::format("{}:{}:{}: invalid JSON: {}", source, line, column, reason));
  }
}

void field_error(std::string_view source, std::string_view where, std::string_view key,
                 std::string_view problem) {
  throw InputError(fmt::format("{}: {}: field '{}' {}", source, where, key, problem));
}

const json& require_field(const json& obj, std::string_view key, std::string_view source,
                          std::string_view where) {
  if (!obj.is_object())
    throw InputError(fmt::format("{}: {} must be a JSON object", source, where));
  auto it = obj.find(key);
  if (it == obj.end()) field_error(source, where, key, "is missing");
  return *it;
}

const json& require_object(const json& doc, std::string_view source, std::string_view where) {
  if (!doc.is_object())
    throw InputError(fmt::format("{}: {} must be a JSON object", source, where));
  return doc;
}

const json& require_array(const json& obj, std::string_view key, std::string_view source,
                          std::string_view where) {
  const json& field = require_field(obj, key, source, where);
  if (!field.is_array()) field_error(source, where, key, "must be an array");
  return field;
}

int64_t get_int(const json& obj, std::string_view key, std::string_view source,
                std::string_view where) {
  const json& field = require_field(obj, key, source, where);
  if (field.is_number_integer()) return field.get<int64_t>();
  if (field.is_number_float()) {
    const double x = field.get<double>();
    if (std::isfinite(x) && x == std::floor(x) && std::abs(x) < 9.2e18)
      return static_cast<int64_t>(x);
  }
  field_error(source, where, key, fmt::format("must be an integer (got {})", field.dump()));
}

int64_t get_int_or(const json& obj, std::string_view key, int64_t fallback, std::string_view source,
                   std::string_view where) {
  if (!obj.contains(key) || obj.at(std::string(key)).is_null()) return fallback;
  return get_int(obj, key, source, where);
}

double get_number(const json& obj, std::string_view key, std::string_view source,
                  std::string_view where) {
  const json& field = require_field(obj, key, source, where);
  if (!field.is_number())
    field_error(source, where, key, fmt::format("must be a number (got {})", field.dump()));
  return field.get<double>();
}

double get_number_or(const json& obj, std::string_view key, double fallback,
                     std::string_view source, std::string_view where) {
  if (!obj.contains(key) || obj.at(std::string(key)).is_null()) return fallback;
  return get_number(obj, key, source, where);
}

std::string get_string_or(const json& obj, std::string_view key, std::string_view fallback,
                          std::string_view source, std::string_view where) {
  if (!obj.contains(key) || obj.at(std::string(key)).is_null()) return std::string(fallback);
  const json& field = obj.at(std::string(key));
  if (field.is_string()) return field.get<std::string>();
  if (field.is_number_integer()) return std::to_string(field.get<int64_t>());
  field_error(source, where, key, fmt::format("must be a string (got {})", field.dump()));
}

bool get_bool_or(const json& obj, std::string_view key, bool fallback, std::string_view source,
                 std::string_view where) {
  if (!obj.contains(key) || obj.at(std::string(key)).is_null()) return fallback;
  const json& field = obj.at(std::string(key));
  if (!field.is_boolean())
    field_error(source, where, key, fmt::format("must be true or false (got {})", field.dump()));
  return field.get<bool>();
}

void check_format(const json& doc, std::string_view format, int version, std::string_view source) {
  require_object(doc, source, "the document");
  const std::string found = get_string_or(doc, "format", "", source, "the document");
  if (found != format)
    throw InputError(
        fmt::format("{}: expected a '{}' document, found format '{}'", source, format, found));
  const int64_t v = get_int(doc, "version", source, "the document");
  if (v != version)
    throw InputError(fmt::format("{}: unsupported {} version {} (this remat reads version {})",
                                 source, format, v, version));
}

}  // namespace remat::io
