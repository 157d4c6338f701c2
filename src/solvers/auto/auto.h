// auto.h — the `auto` solver: a portfolio of the registered solvers, the best plan wins.
// A user should not need to know which solver fits their graph. `auto` runs, within one time
// limit, the members that apply, each through the judged solve() so the simulator measures every
// plan, and returns the best by the "better plan" rule (within budget and cheapest, else the
// lowest peak). The members are the registry rows with a portfolio place (remat/solver.h,
// PortfolioPlace; src/solvers/registry.cc): the baseline first, the members in registry order,
// each with its row's share of the time left, the finisher last with the rest. Today:
//   none       the baseline: the default schedule (so `auto` is never worse than it)
//   mincut, rotor, rockmate   when the graph is a joint training graph (their rows' Accepts)
//   dtr        when no plan before it fits the budget (its row's when_nothing_fits)
//   checkmate  when registered and the graph has at most `checkmate_max_nodes` nodes (30), with
//              at most 10 % of the time left and 5 s
//   fastsa     the finisher: cold (its own grouped stage 1); where another member's plan fits
//              at CI <= 100 %, warm-started from the cheapest first (SolveOptions::start, from a
//              cooler start than FastSA's own; recorded as fastsa_warm) and from the second
//              cheapest when it costs at most 5 % more (fastsa_warm_2), the cold run after them
//              only where their best plan costs more than a point of CI above the least possible
//              cost; when only its own plan
//              fits, warm-started from that (fastsa_refine); when nothing fits, a plan in two
//              passes (fastsa_two_pass, two_pass.h: weight gradients made after a second forward
//              and backward), a second cold run (fastsa_own_settings, with FastSA's own settings;
//              refined when it fits) and a polish of the lowest-peak plan at its own peak
//              (fastsa_polish, from a cool start when that plan is another member's); the
//              two-pass plan and the second cold run are skipped where a lower peak cannot pay
//              (the best peak near the memory lower bound, or the cold run's far above the best)
// Before those rounds, FastSA and rockmate run with quick settings (quick=true: a shorter
// convergence window, a smaller option grid) unless the user gives them parameters, so the
// default `auto` plans in seconds (bench/auto_speed_bench.py).
// With a work limit above the default (or anytime=true), the runs above get the slices the default
// limit gives them (so a larger limit's plan is no worse than the default's), and the work left
// after the finisher goes to a cold FastSA run at its own settings and further FastSA rounds from
// the best plan with new seeds (fastsa_improve_N; where only the two-pass plan fits, every other
// round plans the two passes again) until the work ends or the plan has the least possible cost:
// time given is time used.
// A member whose row does not accept the graph, or that refuses it as it runs (InputError), is
// recorded as "not applicable: why"; neither is fatal, except that a member given parameters
// (MEMBER.KEY=VALUE) passes its InputError on: a bad parameter is the user's to fix, never
// silently dropped. A member whose row keeps the default order contributes neither its proof nor
// its bound (they hold over that class of plans only).
// The plan's stats record the winner (lists "auto_winner") and every member's outcome (lists
// "auto_members"; counters "<member>_peak_bytes", "<member>_cost", "<member>_seconds").
// Series "auto_best_work", "auto_best_peak_percent", "auto_best_ci_percent": the best plan over
// the work spent.
// Parameters (docs/solvers/auto.md): members=a,b,c (which to try), checkmate_max_nodes=N,
// two_pass=true|false, anytime=auto|true|false, quick=true|false, and MEMBER.KEY=VALUE, passed to
// that member.
//   SolveResult r = solve(graph, "auto", options);
#pragma once

#include <memory>
#include <span>

#include "remat/solver.h"

namespace remat::auto_solver {

// The members run through `others` (the registry's judged solve).
std::unique_ptr<Solver> make(const SolverDirectory& others);
std::span<const ParamInfo> params();

}  // namespace remat::auto_solver
