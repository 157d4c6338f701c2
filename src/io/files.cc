#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "json_util.h"
#include "remat/io.h"

namespace remat {

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(fmt::format("{}: is a directory, not a file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw InputError(fmt::format("{}: cannot read", path));
  return std::move(buffer).str();
}

void write_text_file_atomic(const std::string& path, std::string_view text) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  fs::path temp = target;
  temp += fmt::format(".tmp{}", static_cast<unsigned long>(::getpid()));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(temp, ignored);
      throw InputError(fmt::format("{}: write failed", path));
    }
  }
  std::error_code ec;
  fs::rename(temp, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    throw InputError(fmt::format("{}: cannot write: {}", path, ec.message()));
  }
}

FileKind detect_file_kind(std::string_view json_text, std::string_view source) {
  const io::json doc = io::parse_json(json_text, source);
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

Graph read_graph_file(const std::string& path) {
  const std::string text = read_text_file(path);
  switch (detect_file_kind(text, path)) {
    case FileKind::kGraph:
      return parse_graph_json(text, path);
    case FileKind::kNetworkx:
      return import_networkx_json(text, path);
    case FileKind::kChain:
      throw InputError(fmt::format("{}: is a chain file; this command needs a graph", path));
    case FileKind::kPlan:
      throw InputError(fmt::format("{}: is a plan file; this command needs a graph", path));
  }
  throw InputError(fmt::format("{}: unknown file kind", path));
}

void write_graph_file(const std::string& path, const Graph& graph) {
  write_text_file_atomic(path, graph_to_json(graph));
}

}  // namespace remat
