// The `remat` command: one file per subcommand in this folder; this file only dispatches and is
// the one place that turns exceptions into messages and exit codes (2: bad input, 1: bug).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "common.h"
#include "remat/error.h"

namespace {

int run_command(int argc, char** argv) {
  CLI::App app{"remat: rematerialization planner (recompute activations to fit a memory budget)"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");
  remat::cli::register_info(app);
  remat::cli::register_solve(app);
  remat::cli::register_simulate(app);
  remat::cli::register_compare(app);
  remat::cli::register_convert(app);
  remat::cli::register_gen(app);
  remat::cli::register_sweep(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "remat: error: {}\nRun with --help for usage.\n", e.what());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_command(argc, argv);
  } catch (const remat::InputError& e) {
    fmt::print(stderr, "remat: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "remat: bug: {}\n", e.what());
    return 1;
  }
}
