// remat gen KIND: synthetic graphs and chains for tests and benchmarks (generate.h).
#include "common.h"
#include "remat/generate.h"
#include "remat/io.h"

namespace remat::cli {
namespace {

struct RandomLayeredArgs {
  RandomLayeredParams params;
  std::string output;
};

void register_random_layered(CLI::App& gen) {
  auto args = std::make_shared<RandomLayeredArgs>();
  RandomLayeredParams& p = args->params;
  CLI::App* cmd = gen.add_subcommand("random-layered",
                                     "layered random DAG in the style of the MOCCASIN data set");
  cmd->add_option("--nodes,-n", p.num_nodes, "number of nodes")->default_val(p.num_nodes);
  cmd->add_option("--seed", p.seed, "random seed")->default_val(p.seed);
  cmd->add_option("--width", p.width, "mean layer width = width * 2 * sqrt(nodes)")
      ->default_val(p.width);
  cmd->add_option("--edge-density", p.edge_density,
                  "probability of an edge from each node of the previous layer")
      ->default_val(p.edge_density);
  cmd->add_option("--skip-density", p.skip_density,
                  "probability of a skip edge from each earlier node, times the number of layers "
                  "in the window (every layer of the graph when the window is 0)")
      ->default_val(p.skip_density);
  cmd->add_option("--skip-window", p.skip_window,
                  "how many layers before the previous one a skip edge may reach (0: all)")
      ->default_val(p.skip_window);
  cmd->add_option("--min-size", p.min_size, "smallest value size in bytes")
      ->default_val(p.min_size);
  cmd->add_option("--max-size", p.max_size, "largest value size in bytes")->default_val(p.max_size);
  cmd->add_option("--min-cost", p.min_cost, "smallest node cost")->default_val(p.min_cost);
  cmd->add_option("--max-cost", p.max_cost, "largest node cost")->default_val(p.max_cost);
  cmd->add_option("--output,-o", args->output, "output file (default: stdout)")
      ->check(output_path_validator());
  cmd->callback(
      [args] { emit(graph_to_json(generate_random_layered(args->params)), args->output); });
}

struct JointArgs {
  JointParams params;
  std::string output;
};

void register_joint(CLI::App& gen) {
  auto args = std::make_shared<JointArgs>();
  JointParams& p = args->params;
  CLI::App* cmd =
      gen.add_subcommand("joint", "joint forward+backward training graph with phases and op kinds");
  cmd->add_option("--nodes,-n", p.num_nodes,
                  "number of nodes (forward and backward; whole patterns, so up to 8 fewer)")
      ->default_val(p.num_nodes);
  cmd->add_option("--seed", p.seed, "random seed")->default_val(p.seed);
  cmd->add_option("--rows", p.rows, "rows of every activation (batch x sequence)")
      ->default_val(p.rows);
  cmd->add_option("--min-width", p.min_width, "smallest activation width (features)")
      ->default_val(p.min_width);
  cmd->add_option("--max-width", p.max_width, "largest activation width (features)")
      ->default_val(p.max_width);
  cmd->add_option("--output,-o", args->output, "output file (default: stdout)")
      ->check(output_path_validator());
  cmd->callback([args] { emit(graph_to_json(generate_joint(args->params)), args->output); });
}

void register_gen_chain(CLI::App& gen) {
  struct Args {
    ChainGenParams params;
    std::string output;
  };
  auto args = std::make_shared<Args>();
  ChainGenParams& p = args->params;
  CLI::App* cmd =
      gen.add_subcommand("chain", "heterogeneous chain (Rotor model): ResNet-like or random");
  cmd->add_option("--kind", p.kind, "resnet or random")->default_val(p.kind);
  cmd->add_option("--length,-L", p.length, "stages before the loss")->default_val(p.length);
  cmd->add_option("--seed", p.seed, "random seed")->default_val(p.seed);
  cmd->add_option("--batch", p.batch, "resnet: images per batch")->default_val(p.batch);
  cmd->add_option("--min-size", p.min_size, "random: smallest size")->default_val(p.min_size);
  cmd->add_option("--max-size", p.max_size, "random: largest size")->default_val(p.max_size);
  cmd->add_option("--max-time", p.max_time, "random: largest u_f, u_b")->default_val(p.max_time);
  cmd->add_option("--output,-o", args->output, "output file (default: stdout)")
      ->check(output_path_validator());
  cmd->callback([args] { emit(chain_to_json(generate_chain(args->params)), args->output); });
}

}  // namespace

void register_gen(CLI::App& app) {
  CLI::App* gen = app.add_subcommand("gen", "generate synthetic graphs for tests and benchmarks");
  gen->require_subcommand(1);
  register_random_layered(*gen);
  register_joint(*gen);
  register_gen_chain(*gen);
}

}  // namespace remat::cli
