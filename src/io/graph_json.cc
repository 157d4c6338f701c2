// remat-graph JSON v1 (docs/formats.md).
#include <fmt/format.h>

#include <iterator>
#include <span>

#include "json_util.h"
#include "remat/io.h"

namespace remat {
namespace {

using io::json;

std::vector<ValueId> read_value_list(const json& node, std::string_view key,
                                     std::string_view source, std::string_view where) {
  std::vector<ValueId> ids;
  if (!node.contains(key)) return ids;
  const json& list = io::require_array(node, key, source, where);
  for (const json& item : list) {
    if (!item.is_number_integer())
      io::field_error(source, where, key,
                      fmt::format("must list integer value ids (got {})", io::brief(item)));
    const int64_t id = io::saturated_int(item);
    if (id < 0 || id > INT32_MAX)
      io::field_error(source, where, key,
                      fmt::format("refers to value {}, which does not exist", item.dump()));
    ids.push_back(ValueId{static_cast<int32_t>(id)});
  }
  return ids;
}

void check_dense_id(const json& item, size_t index, std::string_view kind,
                    std::string_view source) {
  const std::string where = fmt::format("{} at index {}", kind, index);
  const int64_t id = io::get_int(item, "id", source, where);
  if (id != static_cast<int64_t>(index))
    throw InputError(
        fmt::format("{}: {} has id {}: {} ids must be dense and in order (0, 1, 2, "
                    "...)",
                    source, where, id, kind));
}

Value read_value(const json& item, size_t index, std::string_view source) {
  check_dense_id(item, index, "value", source);
  const std::string where = fmt::format("value {}", index);
  Value v;
  v.name = io::get_string_or(item, "name", "", source, where);
  v.size_bytes = io::get_int(item, "size", source, where);
  v.is_output = io::get_bool_or(item, "output", false, source, where);
  const int64_t alias = io::get_int_or(item, "alias_of", -1, source, where);
  if (alias < -1 || alias > INT32_MAX)
    io::field_error(source, where, "alias_of",
                    fmt::format("refers to value {}, which does not exist", alias));
  v.alias_of = ValueId{static_cast<int32_t>(alias)};
  return v;
}

Node read_node(const json& item, size_t index, std::string_view source) {
  check_dense_id(item, index, "node", source);
  const std::string where = fmt::format("node {}", index);
  Node n;
  n.name = io::get_string_or(item, "name", "", source, where);
  n.op = io::get_string_or(item, "op", "", source, where);
  const std::string kind = io::get_string_or(item, "kind", "other", source, where);
  const std::optional<OpKind> parsed_kind = parse_op_kind(kind);
  if (!parsed_kind)
    io::field_error(
        source, where, "kind",
        fmt::format("is '{}' (known: compute, pointwise, reduction, view, random, other)",
                    shorten(kind)));
  n.kind = *parsed_kind;
  const std::string phase = io::get_string_or(item, "phase", "", source, where);
  const std::optional<Phase> parsed_phase = parse_phase(phase);
  if (!parsed_phase)
    io::field_error(source, where, "phase",
                    fmt::format("is '{}' (known: forward, backward)", shorten(phase)));
  n.phase = *parsed_phase;
  n.cost = io::get_number(item, "cost", source, where);
  n.temp_bytes = io::get_int_or(item, "temp", 0, source, where);
  n.recomputable = io::get_bool_or(item, "recomputable", true, source, where);
  n.inputs = read_value_list(item, "inputs", source, where);
  n.outputs = read_value_list(item, "outputs", source, where);
  return n;
}

}  // namespace

Graph parse_graph_json(std::string_view json_text, std::string_view source) {
  io::GraphStream stream(source);
  const json doc = io::parse_json(json_text, source, stream.callback());
  return stream.build(doc);
}

namespace {

// The document's header fields and whatever values and nodes it still holds, after those already
// in `spec` (GraphStream's: it takes them out of the document while parsing).
Graph graph_from(const json& doc, GraphSpec spec, std::string_view source) {
  io::check_format(doc, "remat-graph", 1, source);
  spec.name = io::get_string_or(doc, "name", "", source, "the document");
  for (const json& item : io::require_array(doc, "values", source, "the document"))
    spec.values.push_back(read_value(item, spec.values.size(), source));
  for (const json& item : io::require_array(doc, "nodes", source, "the document"))
    spec.nodes.push_back(read_node(item, spec.nodes.size(), source));
  Graph graph = Graph::build(std::move(spec), source);
  require_outputs(graph, source);
  return graph;
}

}  // namespace

void require_outputs(const Graph& graph, std::string_view source) {
  for (ValueId v : graph.graph_outputs())
    if (graph.producer(v).valid()) return;
  throw InputError(fmt::format(
      "{}: the graph has no outputs (no value a node produces has \"output\": true): a plan "
      "would compute nothing",
      source));
}

Graph io::graph_from_doc(const json& doc, std::string_view source) {
  return graph_from(doc, {}, source);
}

json::parser_callback_t io::GraphStream::callback() {
  return [this](int depth, json::parse_event_t event, json& parsed) {
    return on_event(depth, event, parsed);
  };
}

// Depth 1 is the document's keys and their values, depth 2 the items of a top-level array. An
// item of "values" or "nodes" is read when it is complete and then dropped from the tree.
bool io::GraphStream::on_event(int depth, json::parse_event_t event, json& parsed) {
  using Event = json::parse_event_t;
  if (depth == 1 && event == Event::key) {
    top_key_ = parsed.get<std::string>();
    const bool list = top_key_ == "values" || top_key_ == "nodes";
    if (list && streaming_ && (top_key_ == "values" ? values_seen_ : nodes_seen_))
      throw InputError(fmt::format("{}: the document has field '{}' twice", source_, top_key_));
    if (list) (top_key_ == "values" ? values_seen_ : nodes_seen_) = true;
    return true;
  }
  if (depth == 1 && event == Event::value && top_key_ == "format")
    streaming_ = !values_seen_ && !nodes_seen_ && parsed.is_string() && parsed == "remat-graph";
  if (!streaming_) return true;
  const bool list_key = top_key_ == "values" || top_key_ == "nodes";
  if (depth == 1 && event == Event::array_start) in_list_ = list_key;
  if (depth == 1 && event == Event::array_end) in_list_ = false;
  const bool item_done =
      event == Event::object_end || event == Event::array_end || event == Event::value;
  if (!in_list_ || depth != 2 || !item_done) return true;
  if (top_key_ == "values")
    spec_.values.push_back(read_value(parsed, spec_.values.size(), source_));
  else
    spec_.nodes.push_back(read_node(parsed, spec_.nodes.size(), source_));
  return false;
}

Graph io::GraphStream::build(const json& doc) { return graph_from(doc, std::move(spec_), source_); }

namespace {

// A JSON string literal (names are UTF-8; a stray byte becomes U+FFFD rather than an exception).
void append_string(std::string& out, std::string_view text) {
  out += json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

void append_ids(std::string& out, std::span<const ValueId> ids) {
  out += '[';
  for (size_t i = 0; i < ids.size(); ++i)
    fmt::format_to(std::back_inserter(out), "{}{}", i ? ", " : "", ids[i].value());
  out += ']';
}

}  // namespace

// Written directly, one value or node per line, "format" first (so readers stream it): a JSON
// tree of the whole graph holds several times the file's size.
std::string graph_to_json(const Graph& graph) {
  std::string out = "{\n \"format\": \"remat-graph\",\n \"version\": 1,\n \"name\": ";
  append_string(out, graph.name());
  out += ",\n \"values\": [";
  for (int32_t v = 0; v < graph.num_values(); ++v) {
    const Value& value = graph.value(ValueId{v});
    fmt::format_to(std::back_inserter(out), "{}\n  {{\"id\": {}, \"name\": ", v ? "," : "", v);
    append_string(out, value.name);
    fmt::format_to(std::back_inserter(out), ", \"size\": {}", value.size_bytes);
    if (value.is_output) out += ", \"output\": true";
    if (value.alias_of != kNoValue)
      fmt::format_to(std::back_inserter(out), ", \"alias_of\": {}", value.alias_of.value());
    out += '}';
  }
  out += "\n ],\n \"nodes\": [";
  for (int32_t n = 0; n < graph.num_nodes(); ++n) {
    const Node& node = graph.node(NodeId{n});
    fmt::format_to(std::back_inserter(out), "{}\n  {{\"id\": {}, \"name\": ", n ? "," : "", n);
    append_string(out, node.name);
    out += ", \"op\": ";
    append_string(out, node.op);
    // "{}" prints the shortest text that reads back as the same double.
    fmt::format_to(std::back_inserter(out), ", \"kind\": \"{}\", \"cost\": {}",
                   to_string(node.kind), node.cost);
    if (node.phase != Phase::kUnknown)
      fmt::format_to(std::back_inserter(out), ", \"phase\": \"{}\"", to_string(node.phase));
    if (node.temp_bytes != 0)
      fmt::format_to(std::back_inserter(out), ", \"temp\": {}", node.temp_bytes);
    if (!node.recomputable) out += ", \"recomputable\": false";
    out += ", \"inputs\": ";
    append_ids(out, node.inputs);
    out += ", \"outputs\": ";
    append_ids(out, node.outputs);
    out += '}';
  }
  out += "\n ]\n}\n";
  return out;
}

}  // namespace remat
