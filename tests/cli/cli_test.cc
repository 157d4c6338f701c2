// The `remat` command end to end: outputs of the happy paths, and for every kind of bad input one
// clear line on stderr, exit code 2, and no output file.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "testing/testing.h"

namespace remat {
namespace {

namespace fs = std::filesystem;
using testing::run_remat;

using testing::write_file;

const std::string kLateUse = std::string(REMAT_SOURCE_DIR) + "/tests/data/late_use.json";

// Each case: command-line arguments (with OUT for an output path) and a fragment of the message.
struct BadInput {
  std::string name;
  std::string args;
  std::string message;
};

TEST(Cli, BadInputGetsOneLineExitTwoAndNoOutput) {
  const std::string dir = testing::temp_dir("cli_bad");
  const std::string bad_json = write_file(dir, "bad.json", "{\n \"format\": \"remat-graph\",\n]");
  const std::string cycle = write_file(dir, "cycle.json", R"({"format": "remat-graph", "version": 1,
    "values": [{"id": 0, "size": 1}, {"id": 1, "size": 1}],
    "nodes": [{"id": 0, "name": "p", "cost": 1, "inputs": [1], "outputs": [0]},
              {"id": 1, "name": "q", "cost": 1, "inputs": [0], "outputs": [1]}]})");
  const std::string negative =
      write_file(dir, "neg.json", R"({"format": "remat-graph", "version": 1,
    "values": [{"id": 0, "name": "a", "size": -3}], "nodes": [{"id": 0, "cost": 1, "outputs": [0]}]})");
  const std::string unknown_id =
      write_file(dir, "unknown.json", R"({"format": "remat-graph", "version": 1,
    "values": [{"id": 0, "size": 3}], "nodes": [{"id": 0, "name": "p", "cost": 1, "inputs": [4], "outputs": [0]}]})");
  const std::string bad_plan =
      write_file(dir, "plan.json", R"({"format": "remat-plan", "version": 1,
    "sequence": [{"id": 2, "name": "h"}, {"id": 0}, {"id": 1}, {"id": 3}]})");
  const std::string out = dir + "/out.json";
  const std::vector<BadInput> cases = {
      {"missing file", "info " + dir + "/nope.json", "nope.json: cannot open"},
      {"bad json", "solve " + bad_json + " -o " + out, "bad.json:3:1: invalid JSON"},
      {"cycle", "solve " + cycle + " -o " + out, "the graph has a cycle"},
      {"negative size", "convert " + negative + " " + out, "value 0 ('a') has negative size -3"},
      {"unknown id", "solve " + unknown_id + " -o " + out,
       "node 0 ('p') has input value 4, which does not exist"},
      {"budget below bound", "solve " + kLateUse + " --budget 20 -o " + out,
       "budget 20 bytes is below the memory lower bound 21 bytes"},
      {"bad budget", "solve " + kLateUse + " --budget lots -o " + out, "invalid budget 'lots'"},
      {"unknown solver", "solve " + kLateUse + " --solver magic -o " + out,
       "unknown solver 'magic'"},
      {"unknown param", "solve " + kLateUse + " --param x=1 -o " + out,
       "auto: unknown parameter 'x'"},
      {"auto bad member", "solve " + kLateUse + " --param members=none,magic -o " + out,
       "'magic' is not a member"},
      {"bad param syntax", "solve " + kLateUse + " --param x -o " + out, "invalid --param 'x'"},
      {"invalid plan", "simulate " + kLateUse + " " + bad_plan,
       "step 0: node 2 ('h') reads value 1 ('b') before it is produced"},
      {"unknown flag", "info " + kLateUse + " --frobnicate", "--frobnicate"},
      {"compare unknown solver", "compare " + kLateUse + " --solvers none,magic",
       "unknown solver 'magic'"},
      {"gen bad nodes", "gen random-layered --nodes 0 -o " + out,
       "--nodes must be in [1, 10000000] (got 0)"},
  };
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.name);
    const testing::CommandResult r = run_remat(c.args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_TRUE(r.err.starts_with("remat: error: ")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()),
            5);  // the 5 inputs; no temp files left
}

TEST(Cli, SolveThenSimulate) {
  const std::string dir = testing::temp_dir("cli_solve");
  const std::string plan = dir + "/plan.json";
  testing::CommandResult r = run_remat("solve " + kLateUse + " --budget 100% -o " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("status    optimal"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak      30 bytes (100.0% of baseline)"), std::string::npos) << r.out;
  r = run_remat("simulate " + kLateUse + " " + plan + " --timeline");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("peak      30 bytes (100.0% of baseline) at step 2 (h)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("3 k 21\n"), std::string::npos) << r.out;
  // Over budget (>= lower bound 21, < baseline 30): the baseline plan is returned and says so.
  r = run_remat("solve " + kLateUse + " --solver none --budget 25 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"status\": \"over-budget\""), std::string::npos) << r.out;
  // The summary says how low a plan could go.
  r = run_remat("solve " + kLateUse + " --solver none --budget 25");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("floor     21 bytes (70.0% of baseline)"), std::string::npos) << r.out;
  // The default solver is `auto`: it finds a plan within 25 bytes and says which member won.
  r = run_remat("solve " + kLateUse + " --budget 25 --json --work-limit 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"solver\": \"auto\""), std::string::npos) << r.out;
  // feasible, or optimal when a member (checkmate) proves it.
  EXPECT_TRUE(r.out.find("\"status\": \"feasible\"") != std::string::npos ||
              r.out.find("\"status\": \"optimal\"") != std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"auto_winner\""), std::string::npos) << r.out;
}

TEST(Cli, InfoCompareConvertGen) {
  const std::string dir = testing::temp_dir("cli_misc");
  testing::CommandResult r = run_remat("info " + kLateUse);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("baseline peak    30 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("memory lower bd  21 bytes (70.0% of baseline)"), std::string::npos)
      << r.out;
  r = run_remat("compare " + kLateUse + " --budgets 100%,80%,50% --solvers none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("none      100%            30      optimal   100.0  0.00"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("over-budget"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("infeasible"), std::string::npos) << r.out;
  const std::string gen = dir + "/gen.json", conv = dir + "/conv.json";
  r = run_remat("gen random-layered --nodes 50 --seed 4 -o " + gen);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_remat("convert " + gen + " " + conv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_remat("info " + conv + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"nodes\": 50"), std::string::npos) << r.out;
  // Same seed, same graph.
  const testing::CommandResult a = run_remat("gen random-layered --nodes 50 --seed 4");
  const testing::CommandResult b = run_remat("gen random-layered --nodes 50 --seed 4");
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, run_remat("gen random-layered --nodes 50 --seed 5").out);
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

TEST(Cli, SweepPrintsCurveAndPlot) {
  const std::string dir = testing::temp_dir("cli_sweep");
  const std::string plot = dir + "/curve.svg";
  // Lower bound 21, baseline 30: budgets 21, 26 (25.5 rounded), 30.
  const testing::CommandResult r =
      testing::run_remat("sweep " + kLateUse + " --points 3 --json --plot " + plot);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"budget_bytes\": 21"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"budget_bytes\": 26"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"budget_bytes\": 30"), std::string::npos) << r.out;
  std::ifstream in(plot);
  std::string first_line;
  std::getline(in, first_line);
  EXPECT_TRUE(first_line.starts_with("<svg")) << first_line;
  const testing::CommandResult bad = testing::run_remat("sweep " + kLateUse + " --points 0");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

TEST(Cli, ScopedParamsReachOnlyTheirSolver) {
  // `none` takes no parameters: a parameter scoped to another solver of the command is not passed
  // to it, one scoped to `none` (or unscoped) is, and is rejected.
  EXPECT_EQ(
      testing::run_remat("compare " + kLateUse +
                         " --budgets 100% --solvers none,mincut --param mincut.fallback=false")
          .exit_code,
      0);
  const testing::CommandResult r =
      testing::run_remat("compare " + kLateUse + " --solvers none --param none.x=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("none: unknown parameter 'x'"), std::string::npos) << r.err;
  // `auto` forwards MEMBER.KEY to its member; a bad one is that member's error.
  const testing::CommandResult scoped =
      testing::run_remat("solve " + kLateUse + " --budget 25 --param fastsa.slots=3");
  EXPECT_EQ(scoped.exit_code, 2);
  EXPECT_NE(scoped.err.find("fastsa: invalid value '3' for parameter 'slots'"), std::string::npos)
      << scoped.err;
}

// SOLVER.KEY=VALUE naming a solver the command does not run (a typo, or a solver left out) is an
// error, not a parameter dropped in silence; auto's members may be named through auto.
TEST(Cli, ScopedParamForASolverNotInTheCommandIsAnError) {
  const std::string rl100 = std::string(REMAT_SOURCE_DIR) + "/examples/rl100.json";
  const testing::CommandResult typo = run_remat(
      "solve " + rl100 + " --budget 80% --solver fastsa --param fastas.iterations_scale=0.1");
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("'fastas' is not a solver of this command"), std::string::npos)
      << typo.err;
  EXPECT_TRUE(typo.out.empty());
  for (const std::string& args :
       {"solve " + kLateUse + " --solver none --param mincut.fallback=false",
        "compare " + kLateUse + " --solvers none,fastsa --param rotor.bins=exact",
        "sweep " + kLateUse + " --solver none --points 2 --param fastsa.slots=16",
        "solve " + kLateUse + " --solver auto --param revolve.bins=3"}) {
    const testing::CommandResult r = run_remat(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find("is not a solver of this command"), std::string::npos) << r.err;
  }
  EXPECT_EQ(run_remat("solve " + kLateUse +
                      " --budget 100% --solver auto --param fastsa.iterations_scale=0.01")
                .exit_code,
            0);
}

// compare checks each row's Accepts before running it: a solver that does not apply to the
// graph (mincut and rotor need forward/backward phases) is a row marked not applicable, with the
// reason, and the others still run.
TEST(Cli, CompareMarksASolverThatDoesNotApplyAndGoesOn) {
  const std::string rl100 = std::string(REMAT_SOURCE_DIR) + "/examples/rl100.json";
  const testing::CommandResult r =
      run_remat("compare " + rl100 + " --budgets 80% --solvers none,rotor,mincut");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("over-budget"), std::string::npos) << r.out;  // none ran
  for (const std::string solver : {"rotor", "mincut"})
    EXPECT_NE(r.out.find("not applicable: " + solver + ": solver '" + solver +
                         "' needs a joint training graph"),
              std::string::npos)
        << r.out;
  const testing::CommandResult json =
      run_remat("compare " + rl100 + " --budgets 80% --solvers none,mincut --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"status\": \"not-applicable\""), std::string::npos) << json.out;
}

// A plan file to start from is read by the front end (--start), for the solvers whose row takes
// a start; the former solver parameter `init` points there.
TEST(Cli, StartPlanFileIsReadByTheCommand) {
  const std::string dir = testing::temp_dir("cli_start");
  const std::string plan = dir + "/plan.json";
  ASSERT_EQ(run_remat("solve " + kLateUse + " --budget 100% --solver none -o " + plan).exit_code,
            0);
  const testing::CommandResult started =
      run_remat("solve " + kLateUse + " --budget 100% --solver fastsa --start " + plan);
  EXPECT_EQ(started.exit_code, 0) << started.err;
  const std::vector<std::pair<std::string, std::string>> errors = {
      {"--solver fastsa --start " + dir + "/missing.json", "missing.json"},
      {"--solver none --start " + plan, "takes no start sequence"},
      {"--solver fastsa --param init=" + plan, "--start PLAN.json"},
  };
  for (const auto& [args, expected] : errors) {
    const testing::CommandResult r = run_remat("solve " + kLateUse + " --budget 100% " + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find(expected), std::string::npos) << args << ": " << r.err;
  }
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// Hostile command lines: each refused with one clear line, never a crash or a wrong answer.
TEST(CliHostile, OptionErrorsAreOneShortLineAndSeedsAreRangeChecked) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"solve " + kLateUse + " --time-limit 1e308", "is not a number of seconds in (0, 1e+07]"},
      {"solve " + kLateUse + " --time-limit -1", "is not a number of seconds"},
      {"solve " + kLateUse + " --seed -1", "'-1' is not a seed in [0, 2^64-1]"},
      {"solve " + kLateUse + " --seed 18446744073709551616", "is not a seed in [0, 2^64-1]"},
      {"solve " + kLateUse + " --threads 100000", "--threads"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    const testing::CommandResult r = run_remat(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_LT(r.err.size(), 400u) << r.err;
  }
  EXPECT_EQ(run_remat("solve " + kLateUse + " --seed 18446744073709551615 --solver none").exit_code,
            0);
}

TEST(CliHostile, SweepPlotEscapesNamesInTheSvg) {
  const std::string dir = testing::temp_dir("cli_svg");
  const std::string graph = write_file(dir, "g.json", R"({"format": "remat-graph", "version": 1,
    "name": "</text><script>alert(1)</script>&",
    "values": [{"id": 0, "size": 4}, {"id": 1, "size": 4, "output": true}],
    "nodes": [{"id": 0, "cost": 1, "outputs": [0]}, {"id": 1, "cost": 1, "inputs": [0], "outputs": [1]}]})");
  const std::string svg = dir + "/curve.svg";
  const testing::CommandResult r =
      run_remat("sweep " + graph + " --solver none --points 2 --plot " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(svg);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find("<script>"), std::string::npos) << text;
  EXPECT_NE(text.find("&lt;/text&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;"), std::string::npos)
      << text;
}

TEST(CliHostile, HostileJsonExitsTwoNamingTheFile) {
  const std::string dir = testing::temp_dir("cli_hostile_json");
  const std::string big =
      write_file(dir, "big.json", "{\"format\": \"remat-graph\", \"version\": 1e400}");
  const std::string deep =
      write_file(dir, "deep.json", std::string(200000, '[') + std::string(200000, ']'));
  for (const auto& [path, message] : std::vector<std::pair<std::string, std::string>>{
           {big, "big.json:1:38: invalid JSON: number out of range"},
           {deep, "deep.json:1:513: invalid JSON: arrays and objects nest deeper than 512"}}) {
    for (const std::string command : {"info ", "solve ", "convert "}) {
      SCOPED_TRACE(command + path);
      const testing::CommandResult r =
          run_remat(command + path + (command == "convert " ? " " + dir + "/o.json" : ""));
      EXPECT_EQ(r.exit_code, 2) << r.err;
      EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err.substr(0, 300);
    }
  }
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// Runs `script` under sh; returns its exit status.
int shell(const std::string& script) {
  const int status = std::system(("sh -c '" + script + "'").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(CliHostile, FirstSigintStopsTheSolveAndWritesTheBestPlan) {
  const std::string dir = testing::temp_dir("cli_sigint");
  const std::string remat = REMAT_BINARY;
  ASSERT_EQ(shell(remat + " gen random-layered --nodes 400 --seed 3 -o " + dir + "/g.json"), 0);
  const auto start = std::chrono::steady_clock::now();
  // fastsa would run its full 60 s; one SIGINT after 1 s must end it with a plan.
  const int code =
      shell(remat + " solve " + dir + "/g.json --solver fastsa --budget 80% -o " + dir +
            "/plan.json --time-limit 60 & pid=$!; sleep 1; kill -INT $pid; wait $pid");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(code, 0);
  EXPECT_LT(seconds, 20.0);
  EXPECT_TRUE(fs::exists(dir + "/plan.json"));
  const testing::CommandResult r = run_remat("simulate " + dir + "/g.json " + dir + "/plan.json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
}

// CBC (checkmate), Clp (checkmate-lp) and Gecode (moccasin) poll the interrupt in their event
// handlers and stop objects: one SIGINT 1 s into a search that would run for hours ends it with a
// complete plan whose stop reason is the interrupt (the wall-clock bound is only a safety net: on
// a loaded machine the stop takes longer than on an idle one).
TEST(CliHostile, FirstSigintStopsMilpLpAndConstraintSearchesWithAPlan) {
  const std::string dir = testing::temp_dir("cli_sigint_solvers");
  const std::string remat = REMAT_BINARY;
  ASSERT_EQ(shell(remat + " gen random-layered --nodes 300 --seed 3 -o " + dir + "/g.json"), 0);
  const std::string solvers = run_remat("solve --help").out;
  for (const std::string solver : {"checkmate", "checkmate-lp", "moccasin"}) {
    if (solvers.find("\n  " + solver + " ") == std::string::npos) continue;  // not built
    SCOPED_TRACE(solver);
    const std::string plan = dir + "/" + solver + ".json";
    const auto start = std::chrono::steady_clock::now();
    const int code = shell(remat + " solve " + dir + "/g.json --solver " + solver +
                           " --budget 80% --work-limit 100000 -o " + plan +
                           " >/dev/null & pid=$!; sleep 1; kill -INT $pid; wait $pid");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(code, 0);
    EXPECT_LT(seconds, 60.0);
    const testing::CommandResult r = run_remat("simulate " + dir + "/g.json " + plan);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::ifstream file(plan);
    const std::string text((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\"interrupted\""), std::string::npos) << text.substr(0, 400);
  }
}

// CBC never writes to standard output (nor reads standard input): with several threads asked for,
// rockmate's per-block MILPs leave `--json` a JSON document.
TEST(Cli, MilpSolversKeepJsonOutputCleanWithSeveralThreads) {
  if (run_remat("solve --help").out.find("checkmate-lp") == std::string::npos)
    GTEST_SKIP() << "checkmate is not built (REMAT_WITH_CBC=OFF)";
  const std::string graph = std::string(REMAT_SOURCE_DIR) + "/tests/data/blocks/hf_gpt2.json";
  const testing::CommandResult r = run_remat("solve " + graph +
                                             " --solver rockmate --budget 50% --json "
                                             "--work-limit 1 --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.front(), '{') << r.out.substr(0, 200);
  EXPECT_EQ(r.out.find("Coin"), std::string::npos) << r.out.substr(0, 200);
}

// Checkmate's bounds in solve and compare, and --bound checkmate (Ctrl-C on a CBC run:
// FirstSigintStopsMilpLpAndConstraintSearchesWithAPlan).
TEST(Cli, CheckmateBoundsAndGaps) {
  if (run_remat("solve --help").out.find("checkmate-lp") == std::string::npos)
    GTEST_SKIP() << "checkmate is not built (REMAT_WITH_CBC=OFF)";
  const std::string dir = testing::temp_dir("cli_checkmate");
  const std::string remat = REMAT_BINARY;
  ASSERT_EQ(shell(remat + " gen random-layered --nodes 16 --seed 5 -o " + dir + "/g.json"), 0);
  testing::CommandResult r =
      run_remat("solve " + dir + "/g.json --solver checkmate --budget 90% --work-limit 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("bound     "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gap 0.00%"), std::string::npos) << r.out;  // 16 nodes: proved optimal
  r = run_remat("compare " + dir +
                "/g.json --budgets 90%,80% --solvers none,checkmate --bound checkmate "
                "--work-limit 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("LP bound at 90%: cost"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gap to LP bound %"), std::string::npos) << r.out;
  r = run_remat(
      "compare " + dir +
      "/g.json --budgets 90% --solvers checkmate --bound checkmate --json --work-limit 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"gap_to_lp_bound_percent\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"cost_lower_bound\""), std::string::npos) << r.out;
  r = run_remat("compare " + dir + "/g.json --solvers none --bound moccasin");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--bound: unknown bound 'moccasin'"), std::string::npos) << r.err;
}

TEST(CliHostile, OutputFollowsSymlinksKeepsPermissionsAndWritesSpecialFiles) {
  const std::string dir = testing::temp_dir("cli_output");
  const std::string real = write_file(dir, "real.json", "old");
  fs::permissions(real, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  fs::create_symlink(real, dir + "/link.json");
  ASSERT_EQ(run_remat("convert " + kLateUse + " " + dir + "/link.json").exit_code, 0);
  EXPECT_TRUE(fs::is_symlink(dir + "/link.json"));
  EXPECT_EQ(fs::status(real).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  std::ifstream in(real);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("remat-graph"), std::string::npos);
  testing::CommandResult r = run_remat("convert " + kLateUse + " /dev/stdout");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("remat-graph"), std::string::npos);
  r = run_remat("convert " + kLateUse + " -");
  EXPECT_NE(r.out.find("remat-graph"), std::string::npos);
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
}

TEST(CliHostile, GraphFromStandardInputIsReadOnce) {
  const std::string remat = REMAT_BINARY;
  const std::string dir = testing::temp_dir("cli_stdin");
  EXPECT_EQ(shell("cat " + kLateUse + " | " + remat + " convert - " + dir + "/out.json"), 0);
  EXPECT_TRUE(fs::exists(dir + "/out.json"));
}

}  // namespace
}  // namespace remat
