// json_util.h — strict field access for the readers in src/io/, with errors naming the file and
// the object ("model.json: node 3: field 'cost' must be a number"). Internal to src/io/.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "remat/error.h"
#include "remat/io.h"

namespace remat::io {

using nlohmann::json;

// Arrays and objects may nest at most this deep; deeper input is rejected before parsing.
inline constexpr size_t kMaxJsonDepth = 512;

// Parses JSON text; a syntax error, a number beyond the double range or nesting deeper than
// kMaxJsonDepth names the line and column.
json parse_json(std::string_view text, std::string_view source);

// A value for an error message, cut short (remat::shorten): arrays and objects are described, not
// dumped, so a deep or huge value cannot blow up the message.
std::string brief(const json& value);

// `where` is "node 3", "value 7", "chain stage 2", ...
[[noreturn]] void field_error(std::string_view source, std::string_view where, std::string_view key,
                              std::string_view problem);

const json& require_field(const json& obj, std::string_view key, std::string_view source,
                          std::string_view where);
const json& require_object(const json& doc, std::string_view source, std::string_view where);
const json& require_array(const json& obj, std::string_view key, std::string_view source,
                          std::string_view where);

int64_t get_int(const json& obj, std::string_view key, std::string_view source,
                std::string_view where);
int64_t get_int_or(const json& obj, std::string_view key, int64_t fallback, std::string_view source,
                   std::string_view where);
double get_number(const json& obj, std::string_view key, std::string_view source,
                  std::string_view where);
double get_number_or(const json& obj, std::string_view key, double fallback,
                     std::string_view source, std::string_view where);
std::string get_string_or(const json& obj, std::string_view key, std::string_view fallback,
                          std::string_view source, std::string_view where);
bool get_bool_or(const json& obj, std::string_view key, bool fallback, std::string_view source,
                 std::string_view where);

// Readers of an already parsed document, so a file is read and parsed once (read_graph_file).
Graph graph_from_doc(const json& doc, std::string_view source);
Graph networkx_from_doc(const json& doc, std::string_view source);
FileKind file_kind_of(const json& doc, std::string_view source);

// Checks the "format" and "version" fields of a remat document.
void check_format(const json& doc, std::string_view format, int version, std::string_view source);

}  // namespace remat::io
