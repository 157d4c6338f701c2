// The `remat` command: one file per subcommand in this folder; this file only dispatches and is
// the one place that turns exceptions into messages and exit codes (2: bad input or a failed
// write to stdout/stderr, 1: bug). Every message is one line: control characters in it (a node
// name with a newline or a terminal escape) are printed escaped.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <new>
#include <string_view>

#include "common.h"
#include "remat/error.h"
#include "remat/interrupt.h"
#include "remat/io.h"

namespace {

// First SIGINT: ask the solvers to stop (Deadline::expired() turns true) so the command writes
// the best plan found so far. Second SIGINT, or SIGTERM/SIGHUP: remove the temporary output file
// and die of the signal. Only async-signal-safe calls here.
extern "C" void on_interrupt(int signal_number) {
  if (!remat::request_interrupt()) return;
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

// Writes "remat: KIND: MESSAGE" on stderr without throwing (fmt::print throws when stderr is
// full, which inside a catch block would end the process); returns `code`.
int report(const char* kind, std::string_view message, int code) {
  const std::string line = fmt::format("remat: {}: {}\n", kind, remat::escape_control(message));
  std::fwrite(line.data(), 1, line.size(), stderr);
  return code;
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
    return report("error",
                  fmt::format("{} (run with --help for usage)", remat::shorten(e.what(), 300)), 2);
  }
  return 0;
}

int run_and_report(int argc, char** argv) {
  try {
    return run_command(argc, argv);
  } catch (const remat::InputError& e) {
    return report("error", e.what(), 2);
  } catch (const std::bad_alloc&) {
    return report("error", "out of memory", 1);
  } catch (const std::exception& e) {
    return report("bug", e.what(), 1);
  } catch (...) {
    return report("bug", "an exception of unknown type", 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  install_signal_handlers();
  int code = run_and_report(argc, argv);
  // Output that never arrived is not a success (`remat info g.json > /dev/full`); a failure
  // already reported keeps its message and code.
  const bool stdout_failed = std::fflush(stdout) != 0 || std::ferror(stdout);
  const bool stderr_failed = std::fflush(stderr) != 0 || std::ferror(stderr);
  if (code == 0 && stdout_failed) code = report("error", "standard output: write failed", 2);
  if (code == 0 && stderr_failed) code = 2;
  return code;
}
