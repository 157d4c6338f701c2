// chain_commands.h — the chain side of `remat info / solve / compare / simulate / gen chain`.
// The graph subcommands detect a chain file (detect_file_kind) and hand it over here; chain
// solvers live in src/solvers/rotor/ and every figure printed comes from the chain simulator.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "common.h"

namespace remat::cli {

// True when `path` holds a remat-chain document.
bool is_chain_file(const std::string& path);

void run_chain_info(const std::string& path, bool json);
void run_chain_solve(const std::string& path, const std::string& budget, const std::string& solver,
                     const std::string& output, bool json, const SolverArgs& solver_args);
void run_chain_compare(const std::string& path, const std::vector<std::string>& budgets,
                       const std::vector<std::string>& solvers, bool json,
                       const SolverArgs& solver_args);
void run_chain_simulate(const std::string& chain_path, const std::string& plan_path, bool timeline,
                        bool json);
// `remat gen chain`.
void register_gen_chain(CLI::App& gen);
// "Chain solvers: ..." for --help footers.
std::string chain_solver_help();

}  // namespace remat::cli
