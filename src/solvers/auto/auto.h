// auto.h — the `auto` solver: a portfolio of the registered solvers, the best plan wins.
// A user should not need to know which solver fits their graph. `auto` runs, within one time
// limit, the members that apply, each through the judged solve() so the simulator measures every
// plan, and returns the best by the "better plan" rule (within budget and cheapest, else the
// lowest peak). The portfolio, in order (cheap first, the rest of the time to FastSA):
//   none       the default schedule (so `auto` is never worse than it)
//   mincut     when the graph has forward/backward phases
//   rotor, rockmate   when registered and the graph has chain structure
//   checkmate  when registered and the graph has at most `checkmate_max_nodes` nodes (30), with
//              at most 10 % of the time left and 5 s
//   fastsa     cold (its own grouped stage 1); then, when other members' plans fit the budget,
//              warm-started from the cheapest (SolveOptions::start; recorded as fastsa_warm)
//              and from the second cheapest (fastsa_warm_2); when nothing fits, a restart
//              with another seed (fastsa_restart), a plan in two passes (fastsa_two_pass,
//              two_pass.h: weight gradients made after a second forward and backward), and a
//              polish of the lowest-peak plan at its own peak (fastsa_polish)
// Members are looked up in the registry by name: one that is not registered is skipped and one
// that refuses the graph (InputError) is recorded as "not applicable: why"; neither is fatal,
// except that a member given parameters (MEMBER.KEY=VALUE) passes its InputError on: a bad
// parameter is the user's to fix, never silently dropped.
// The plan's stats record the winner (lists "auto_winner") and every member's outcome (lists
// "auto_members"; counters "<member>_peak_bytes", "<member>_cost", "<member>_seconds").
// Parameters (docs/solvers/auto.md): members=a,b,c (which to try), checkmate_max_nodes=N,
// two_pass=true|false, and MEMBER.KEY=VALUE, passed to that member.
//   SolveResult r = solve(graph, "auto", options);
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "remat/solver.h"

namespace remat::auto_solver {

// The default portfolio, in the order the members run.
inline constexpr std::string_view kMembers[] = {"none",     "mincut",    "rotor",
                                                "rockmate", "checkmate", "fastsa"};
// Checkmate's MILP has O(n^2) binaries over a fixed order: up to this many nodes CBC usually
// proves the optimum within a few seconds; above it (already at 40 random layered nodes) it often
// runs to its time limit, which is better spent on FastSA. It gets at most 10 % of the time left,
// and at most kCheckmateMaxSeconds.
inline constexpr int64_t kCheckmateMaxNodes = 30;
inline constexpr double kCheckmateMaxSeconds = 5.0;

// The members run through `others` (the registry's judged solve).
std::unique_ptr<Solver> make(const SolverDirectory& others);
std::span<const ParamInfo> params();

}  // namespace remat::auto_solver
