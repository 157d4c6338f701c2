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
// kMaxJsonDepth names the line and column. `callback` (nlohmann's parser callback) may consume
// parts of the document as they are parsed; an InputError it throws passes through.
json parse_json(std::string_view text, std::string_view source,
                const json::parser_callback_t& callback = nullptr);

// Streams the "values" and "nodes" of a remat-graph document into a GraphSpec while it is parsed,
// so the document tree never holds the graph (it would take several times the file's size). It
// streams when "format": "remat-graph" comes before them, as remat writes it; otherwise the
// document keeps them and graph_from_doc reads it.
class GraphStream {
 public:
  explicit GraphStream(std::string_view source) : source_(source) {}
  // The parser callback: pass it to parse_json (it refers to this object).
  json::parser_callback_t callback();
  // The graph of `doc`, the document parse_json returned with callback(): it checks format,
  // version and name, and takes the streamed values and nodes (or reads them from `doc`).
  Graph build(const json& doc);

 private:
  bool on_event(int depth, json::parse_event_t event, json& parsed);

  std::string source_;
  bool streaming_ = false;  // "format" was "remat-graph" before any value or node
  std::string top_key_;     // the current key of the document object
  bool in_list_ = false;    // inside the array of "values" or "nodes"
  bool values_seen_ = false, nodes_seen_ = false;
  GraphSpec spec_;
};

// A value for an error message, cut short (remat::shorten): arrays and objects are described, not
// dumped, so a deep or huge value cannot blow up the message.
std::string brief(const json& value);

// The integer `item` holds (is_number_integer()), with one above 2^63-1 read as 2^63-1 instead
// of wrapping to a negative number; messages print item.dump(), the number as written.
int64_t saturated_int(const json& item);

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
Chain chain_from_doc(const json& doc, std::string_view source);
FileKind file_kind_of(const json& doc, std::string_view source);

// Checks the "format" and "version" fields of a remat document.
void check_format(const json& doc, std::string_view format, int version, std::string_view source);

}  // namespace remat::io
