// The `remat` command: one file per subcommand in this folder; this file only dispatches and is
// the one place that turns exceptions into messages and exit codes (2: bad input, 1: bug).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>

#include "common.h"
#include "remat/error.h"
#include "remat/interrupt.h"
#include "remat/io.h"

namespace {

// First SIGINT: ask the solvers to stop (Deadline::expired() turns true) so the command writes
// the best plan found so far. Second SIGINT, or SIGTERM/SIGHUP: remove the temporary output file
// and die of the signal. Only async-signal-safe calls here.
extern "C" void on_interrupt(int signal_number) {
  if (!remat::interrupt_requested()) {
    remat::request_interrupt();
    return;
  }
  remat::remove_pending_output();
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

extern "C" void on_terminate(int signal_number) {
  remat::remove_pending_output();
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

void install_signal_handlers() {
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_terminate);
  std::signal(SIGHUP, on_terminate);
}

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
    // One line, cut short: CLI11's messages echo the offending argument.
    fmt::print(stderr, "remat: error: {} (run with --help for usage)\n",
               remat::shorten(e.what(), 300));
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  install_signal_handlers();
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
