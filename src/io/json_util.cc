#include "json_util.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

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

// The first offset outside string literals for which `found(offset)` is true; text.size() when
// there is none. Both scanners below must skip string contents, escapes included.
template <class Found>
size_t find_outside_strings(std::string_view text, Found found) {
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (found(i)) {
      return i;
    }
  }
  return text.size();
}

// Finds the first place where arrays and objects nest deeper than kMaxJsonDepth, skipping string
// contents; returns text.size() when there is none. nlohmann's parser does not recurse but dumps
// and destructors of deep values do, so the cap comes before parsing.
size_t find_too_deep(std::string_view text) {
  size_t depth = 0;
  return find_outside_strings(text, [&](size_t i) {
    const char c = text[i];
    if (c == '[' || c == '{') return ++depth > kMaxJsonDepth;
    if ((c == ']' || c == '}') && depth > 0) --depth;
    return false;
  });
}

// Where the first number token that does not fit a double starts (nlohmann reports no position
// for it); text.size() when none is found.
size_t find_number_overflow(std::string_view text) {
  size_t skip_to = 0;  // the end of the last number token checked
  return find_outside_strings(text, [&](size_t i) {
    const char c = text[i];
    if (i < skip_to || (c != '-' && !std::isdigit(static_cast<unsigned char>(c)))) return false;
    size_t end = i;
    while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) ||
                                 std::strchr("+-.eE", text[end]) != nullptr))
      ++end;
    skip_to = end;
    const std::string token(text.substr(i, end - i));
    errno = 0;
    const double x = std::strtod(token.c_str(), nullptr);
    return !std::isfinite(x) || (errno == ERANGE && x != 0);
  });
}

}  // namespace

std::string brief(const json& value) {
  if (value.is_array()) return fmt::format("an array of {} items", value.size());
  if (value.is_object()) return fmt::format("an object with {} fields", value.size());
  return shorten(value.dump(-1, ' ', false, json::error_handler_t::replace));
}

json parse_json(std::string_view text, std::string_view source,
                const json::parser_callback_t& callback) {
  const size_t deep = find_too_deep(text);
  if (deep < text.size()) {
    const auto [line, column] = line_column(text, deep);
    throw InputError(fmt::format("{}:{}:{}: invalid JSON: arrays and objects nest deeper than {}",
                                 source, line, column, kMaxJsonDepth));
  }
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::parse_error& e) {
    const size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    const auto [line, column] = line_column(text, byte);
    std::string reason = e.what();
    // Drop nlohmann's "[json.exception...] parse error at line L, column C: " prefix.
    const size_t colon = reason.find(": ", reason.find("column"));
    if (colon != std::string::npos) reason = reason.substr(colon + 2);
    throw InputError(
        fmt::format("{}:{}:{}: invalid JSON: {}", source, line, column, shorten(reason, 200)));
  } catch (const json::out_of_range&) {
    // The only out_of_range the parser throws: a number beyond the double range (1e400).
    const size_t at = find_number_overflow(text);
    const auto [line, column] = line_column(text, at);
    throw InputError(fmt::format("{}:{}:{}: invalid JSON: number out of range (beyond ±1.8e308)",
                                 source, line, column));
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", source, shorten(e.what(), 200)));
  }
}

int64_t saturated_int(const json& item) {
  if (item.is_number_unsigned() && item.get<uint64_t>() > uint64_t{INT64_MAX}) return INT64_MAX;
  return item.get<int64_t>();
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
  if (field.is_number_unsigned() && field.get<uint64_t>() > uint64_t{INT64_MAX})
    field_error(source, where, key,
                fmt::format("is {}, above the largest integer 2^63-1", field.dump()));
  if (field.is_number_integer()) return field.get<int64_t>();
  if (field.is_number_float()) {
    const double x = field.get<double>();
    if (std::isfinite(x) && x == std::floor(x) && std::abs(x) < 9.2e18)
      return static_cast<int64_t>(x);
  }
  field_error(source, where, key, fmt::format("must be an integer (got {})", brief(field)));
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
    field_error(source, where, key, fmt::format("must be a number (got {})", brief(field)));
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
  if (field.is_number_integer()) return field.dump();  // as written, 2^64-1 included
  field_error(source, where, key, fmt::format("must be a string (got {})", brief(field)));
}

bool get_bool_or(const json& obj, std::string_view key, bool fallback, std::string_view source,
                 std::string_view where) {
  if (!obj.contains(key) || obj.at(std::string(key)).is_null()) return fallback;
  const json& field = obj.at(std::string(key));
  if (!field.is_boolean())
    field_error(source, where, key, fmt::format("must be true or false (got {})", brief(field)));
  return field.get<bool>();
}

void check_format(const json& doc, std::string_view format, int version, std::string_view source) {
  require_object(doc, source, "the document");
  const std::string found = get_string_or(doc, "format", "", source, "the document");
  if (found != format)
    throw InputError(fmt::format("{}: expected a '{}' document, found format '{}'", source, format,
                                 shorten(found)));
  const int64_t v = get_int(doc, "version", source, "the document");
  if (v != version)
    throw InputError(fmt::format("{}: unsupported {} version {} (this remat reads version {})",
                                 source, format, v, version));
}

}  // namespace remat::io
