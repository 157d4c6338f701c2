// File kinds and the graph file reader and writer (remat/io.h); text files are remat/files.h's.
#include <fmt/format.h>

#include "json_util.h"
#include "remat/io.h"

namespace remat {

FileKind detect_file_kind(std::string_view json_text, std::string_view source) {
  return io::file_kind_of(io::parse_json(json_text, source), source);
}

FileKind io::file_kind_of(const json& doc, std::string_view source) {
  if (!doc.is_object())
    throw InputError(fmt::format("{}: the document must be a JSON object", source));
  if (doc.contains("format") && doc["format"].is_string()) {
    const std::string format = doc["format"].get<std::string>();
    if (format == "remat-graph") return FileKind::kGraph;
    if (format == "remat-chain") return FileKind::kChain;
    if (format == "remat-plan") return FileKind::kPlan;
    throw InputError(
        fmt::format("{}: unknown format '{}' (known: remat-graph, remat-chain, "
                    "remat-plan, NetworkX node-link JSON)",
                    source, format));
  }
  if (doc.contains("nodes") && (doc.contains("links") || doc.contains("edges")))
    return FileKind::kNetworkx;
  throw InputError(
      fmt::format("{}: not a remat file (no 'format' field) nor NetworkX node-link "
                  "JSON (no 'nodes' and 'links')",
                  source));
}

std::variant<Graph, Chain> parse_graph_or_chain(std::string_view json_text,
                                                std::string_view source) {
  io::GraphStream stream(source);
  const io::json doc = io::parse_json(json_text, source, stream.callback());
  switch (io::file_kind_of(doc, source)) {
    case FileKind::kGraph:
      return stream.build(doc);
    case FileKind::kNetworkx:
      return io::networkx_from_doc(doc, source);
    case FileKind::kChain:
      return io::chain_from_doc(doc, source);
    case FileKind::kPlan:
      throw InputError(fmt::format("{}: is a plan file, not a graph or a chain", source));
  }
  throw InputError(fmt::format("{}: unknown file kind", source));
}

Graph read_graph_file(const std::string& path) {
  // One read and one parse: the file may be a pipe ("-", /dev/stdin) that cannot be read twice.
  std::variant<Graph, Chain> data = parse_graph_or_chain(read_text_file(path), path);
  if (std::holds_alternative<Chain>(data))
    throw InputError(fmt::format("{}: is a chain file; this command needs a graph", path));
  return std::get<Graph>(std::move(data));
}

void write_graph_file(const std::string& path, const Graph& graph) {
  write_text_file_atomic(path, graph_to_json(graph));
}

}  // namespace remat
