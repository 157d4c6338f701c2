// Chain JSON v1 (docs/formats.md): the Rotor chain model.
#include <fmt/format.h>

#include "json_util.h"
#include "remat/io.h"

namespace remat {
namespace {

using io::json;

int64_t read_size(const json& obj, std::string_view key, int64_t fallback, std::string_view source,
                  std::string_view where) {
  const int64_t bytes = io::get_int_or(obj, key, fallback, source, where);
  if (bytes < 0) io::field_error(source, where, key, fmt::format("is negative ({})", bytes));
  return bytes;
}

double read_time(const json& obj, std::string_view key, std::string_view source,
                 std::string_view where) {
  const double t = io::get_number_or(obj, key, 0.0, source, where);
  if (!(t >= 0)) io::field_error(source, where, key, fmt::format("is negative ({})", t));
  return t;
}

ChainSizes read_sizes(const json& obj, std::string_view source, std::string_view where) {
  ChainSizes s;
  s.a = read_size(obj, "a", -1, source, where);
  if (s.a < 0) io::field_error(source, where, "a", "is missing");
  s.abar = read_size(obj, "abar", s.a, source, where);
  s.delta = read_size(obj, "delta", s.a, source, where);
  return s;
}

json sizes_json(const ChainSizes& s) { return {{"a", s.a}, {"abar", s.abar}, {"delta", s.delta}}; }

}  // namespace

Chain parse_chain_json(std::string_view json_text, std::string_view source) {
  return io::chain_from_doc(io::parse_json(json_text, source), source);
}

Chain io::chain_from_doc(const json& doc, std::string_view source) {
  io::check_format(doc, "remat-chain", 1, source);
  Chain chain;
  chain.name = io::get_string_or(doc, "name", "", source, "the document");
  chain.input =
      read_sizes(io::require_field(doc, "input", source, "the document"), source, "input");
  const json& stages = io::require_array(doc, "stages", source, "the document");
  if (stages.size() < 2)
    throw InputError(
        fmt::format("{}: a chain needs at least one stage and the loss stage (got {} "
                    "stages)",
                    source, stages.size()));
  for (size_t i = 0; i < stages.size(); ++i) {
    const std::string where = fmt::format("stage {}", i + 1);
    const json& item = io::require_object(stages[i], source, where);
    ChainStage stage;
    stage.name = io::get_string_or(item, "name", fmt::format("F{}", i + 1), source, where);
    stage.u_f = read_time(item, "u_f", source, where);
    stage.u_b = read_time(item, "u_b", source, where);
    stage.sizes = read_sizes(item, source, where);
    stage.o_f = read_size(item, "o_f", 0, source, where);
    stage.o_b = read_size(item, "o_b", 0, source, where);
    chain.stages.push_back(std::move(stage));
  }
  check_chain_limits(chain, source);
  return chain;
}

std::string chain_to_json(const Chain& chain) {
  json stages = json::array();
  for (const ChainStage& s : chain.stages) {
    json item = sizes_json(s.sizes);
    item["name"] = s.name;
    item["u_f"] = s.u_f;
    item["u_b"] = s.u_b;
    item["o_f"] = s.o_f;
    item["o_b"] = s.o_b;
    stages.push_back(std::move(item));
  }
  const json doc = {{"format", "remat-chain"},
                    {"version", 1},
                    {"name", chain.name},
                    {"input", sizes_json(chain.input)},
                    {"stages", std::move(stages)}};
  return doc.dump(1) + "\n";
}

Chain read_chain_file(const std::string& path) {
  return parse_chain_json(read_text_file(path), path);
}

void write_chain_file(const std::string& path, const Chain& chain) {
  write_text_file_atomic(path, chain_to_json(chain));
}

}  // namespace remat
