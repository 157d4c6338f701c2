// remat convert IN OUT: any graph file (NetworkX JSON of the Checkmate / MOCCASIN data sets, or
// remat-graph) to remat-graph JSON v1.
#include "common.h"
#include "remat/io.h"

namespace remat::cli {
namespace {

struct ConvertArgs {
  std::string input;
  std::string output;
};

}  // namespace

void register_convert(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* cmd = app.add_subcommand("convert", "convert a NetworkX graph to remat-graph JSON");
  cmd->add_option("IN", args->input, "input graph (NetworkX node-link or remat-graph JSON)")
      ->required();
  cmd->add_option("OUT", args->output, "output remat-graph JSON ('-' for stdout)")
      ->required()
      ->check(output_path_validator());
  cmd->callback([args] { emit(graph_to_json(read_graph_file(args->input)), args->output); });
}

}  // namespace remat::cli
