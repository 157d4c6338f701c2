// The `remat` command on hostile input and hostile surroundings: valid but strange graphs get a
// plan or one clear line (never an abort), output that cannot be written is an error, names
// cannot forge or colour messages, and output options say exactly what they write.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "testing/testing.h"

namespace remat {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::run_remat;
using testing::write_file;

const std::string kLateUse = std::string(REMAT_SOURCE_DIR) + "/tests/data/late_use.json";
// Runs `WRAPPER remat ARGS_AND_REDIRECTIONS` under sh (run_remat redirects both streams itself);
// stderr goes to a file unless the command redirects it. Returns the exit code (-1 when a signal
// ended the process) and what reached the file.
struct Raw {
  int exit_code = -1;
  std::string err;
};
Raw run_raw(const std::string& args_and_redirections, const std::string& dir,
            const std::string& wrapper = "") {
  const std::string err = dir + "/raw_err";
  fs::remove(err);
  std::string command = wrapper + std::string(REMAT_BINARY) + " " + args_and_redirections;
  if (args_and_redirections.find("2>") == std::string::npos) command += " 2>" + err;
  if (args_and_redirections.find('<') == std::string::npos) command += " </dev/null";
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(err)};
}

bool built_with(const std::string& solver) {
  return run_remat("solve --help").out.find("\n  " + solver + " ") != std::string::npos;
}

void expect_one_error_line(const testing::CommandResult& r, const std::string& fragment) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(r.err.starts_with("remat: error: ")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
}

// Two nodes, two values, the second not marked as an output: nothing to compute.
constexpr const char* kNoOutputs = R"({"format":"remat-graph","version":1,"name":"t",
  "values":[{"id":0,"size":100},{"id":1,"size":100}],
  "nodes":[{"id":0,"cost":1,"inputs":[],"outputs":[0]},{"id":1,"cost":1,"inputs":[0],"outputs":[1]}]})";

TEST(CliHostile, AGraphWithoutOutputsIsRefusedAtReadTimeByEveryCommand) {
  const std::string dir = testing::temp_dir("cli_no_outputs");
  const std::string graph = write_file(dir, "g.json", kNoOutputs);
  for (const std::string& args :
       {"info " + graph, "solve " + graph, "solve " + graph + " --solver fastsa",
        "compare " + graph + " --solvers none,fastsa", "sweep " + graph + " --points 2"}) {
    SCOPED_TRACE(args);
    expect_one_error_line(run_remat(args), "the graph has no outputs");
  }
}

// Costs are any finite numbers; the LP/MILP/CP models get them scaled (Clp aborts the process
// on an objective coefficient of 1e25 or more).
TEST(CliHostile, HugeCostsAreScaledForTheModelSolvers) {
  const std::string dir = testing::temp_dir("cli_huge_costs");
  const std::string graph = dir + "/g.json";
  ASSERT_EQ(run_remat("gen random-layered --nodes 20 --seed 3 --min-cost 2e25 --max-cost 1e26 -o " +
                      graph)
                .exit_code,
            0);
  for (const char* solver : {"checkmate", "checkmate-lp", "moccasin", "auto"}) {
    if (!built_with(solver)) continue;
    SCOPED_TRACE(solver);
    const testing::CommandResult r =
        run_remat("solve " + graph + " --budget 90% --time-limit 1 --solver " + solver);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(r.out.find("status    feasible") != std::string::npos ||
                r.out.find("status    optimal") != std::string::npos)
        << r.out;
  }
}

// Sizes of 1e15 bytes with a gcd of 1: CBC's cut generators asserted (aborted the process) on the
// memory rows. The Checkmate models refuse them with one line; auto runs its other members.
TEST(CliHostile, ModelSolversRefuseSizesBeyondTheirRangeInsteadOfAborting) {
  if (!built_with("checkmate")) GTEST_SKIP() << "checkmate is not built (REMAT_WITH_CBC=OFF)";
  const std::string dir = testing::temp_dir("cli_huge_sizes");
  const std::string graph = dir + "/g.json";
  ASSERT_EQ(run_remat("gen random-layered --nodes 25 --seed 3 --min-size 1000000000000000 "
                      "--max-size 1500000000000001 -o " +
                      graph)
                .exit_code,
            0);
  for (const char* solver : {"checkmate", "checkmate-lp"}) {
    SCOPED_TRACE(solver);
    expect_one_error_line(
        run_remat("solve " + graph + " --budget 85% --time-limit 1 --solver " + solver),
        "above the 2^40 units the MILP/LP models take");
  }
  const testing::CommandResult r = run_remat("solve " + graph + " --budget 85% --time-limit 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// A graph near the cost limit prints finite percentages (100 x cost overflowed to inf%); above
// the limit, one line names it.
TEST(CliHostile, CostsNearTheLargestDoubleNeverPrintInfinitePercentages) {
  const std::string dir = testing::temp_dir("cli_dbl_max");
  const std::string graph = dir + "/g.json";
  ASSERT_EQ(run_remat("gen random-layered --nodes 30 --seed 1 --min-cost 1e295 --max-cost 6e295 "
                      "-o " +
                      graph)
                .exit_code,
            0);
  for (const std::string& args :
       {"solve " + graph + " --budget 90% --solver fastsa --time-limit 0.3",
        "compare " + graph + " --budgets 90% --solvers none,fastsa --time-limit 0.3"}) {
    SCOPED_TRACE(args);
    const testing::CommandResult r = run_remat(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find("inf"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
  }
  const std::string above = write_file(dir, "above.json", R"({"format":"remat-graph","version":1,
    "values":[{"id":0,"size":1},{"id":1,"size":1,"output":true}],
    "nodes":[{"id":0,"cost":1.7e308,"outputs":[0]},{"id":1,"cost":1,"inputs":[0],"outputs":[1]}]})");
  expect_one_error_line(run_remat("info " + above), "above the limit of 1e+298");
}

// MOCCASIN's Gecode model on 2,000 nodes: the cumulative's capacity times its start domains
// overflowed Gecode's 64-bit check ("bug: cumulative: Number out of limits"); a coarser size unit
// keeps it in range.
TEST(CliHostile, MoccasinKeepsLargeGraphsInGecodesIntegerRange) {
  if (!built_with("moccasin")) GTEST_SKIP() << "moccasin is not built (REMAT_WITH_GECODE=OFF)";
  const std::string dir = testing::temp_dir("cli_moccasin_range");
  const std::string graph = dir + "/g.json";
  ASSERT_EQ(run_remat("gen random-layered --nodes 2000 --seed 1 -o " + graph).exit_code, 0);
  const testing::CommandResult r = run_remat("solve " + graph +
                                             " --solver moccasin --budget 80% --time-limit 0.5 "
                                             "-o " +
                                             dir + "/plan.json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(run_remat("simulate " + graph + " " + dir + "/plan.json").exit_code, 0);
}

TEST(CliHostile, FailedWritesToStandardOutputOrErrorExitTwo) {
  const std::string dir = testing::temp_dir("cli_full");
  for (const std::string& args :
       {"info " + kLateUse, "solve " + kLateUse + " --json",
        std::string("gen random-layered --nodes 10"), "compare " + kLateUse + " --solvers none"}) {
    SCOPED_TRACE(args);
    const Raw r = run_raw(args + " >/dev/full", dir);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("remat: error: standard output: write failed"), std::string::npos)
        << r.err;
  }
  // The error message itself cannot be written: still exit 2, not an abort.
  EXPECT_EQ(run_raw("info " + dir + "/missing.json 2>/dev/full", dir).exit_code, 2);
  EXPECT_EQ(run_raw("info " + kLateUse + " >/dev/null 2>/dev/full", dir).exit_code, 0);
}

TEST(CliHostile, NamesAreEscapedInMessagesAndOutput) {
  const std::string dir = testing::temp_dir("cli_names");
  // A name with a newline could forge a second "remat: error:" line; ESC and CSI could colour or
  // clear the terminal.
  const std::string values =
      R"("values":[{"id":0,"size":100,"name":"a\nremat: error: forged\u001b]0;title\u0007"},
                   {"id":1,"size":100,"output":true,"name":"b\u009b31m"}])";
  const std::string cycle = write_file(dir, "cycle.json",
                                       R"({"format":"remat-graph","version":1,
    "name":"evil\nremat: error: forged\u001b[31m",)" +
                                           values + R"(,
    "nodes":[{"id":0,"cost":1,"inputs":[1],"outputs":[0],"name":"x\ny"},
             {"id":1,"cost":1,"inputs":[0],"outputs":[1],"name":"z\u001b[2J"}]})");
  const testing::CommandResult bad = run_remat("info " + cycle);
  expect_one_error_line(bad, "the graph has a cycle: 'x\\ny' -> 'z\\x1b[2J' -> 'x\\ny'");
  std::string text = read_file(cycle);
  text.replace(text.find(R"("inputs":[1])"), 12, R"("inputs":[])");
  const std::string ok = write_file(dir, "ok.json", text);
  const testing::CommandResult info = run_remat("info " + ok);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_TRUE(info.out.starts_with("graph            evil\\nremat: error: forged\\x1b[31m\n"))
      << info.out;
  const testing::CommandResult solve = run_remat("solve " + ok + " -o " + dir + "/plan.json");
  ASSERT_EQ(solve.exit_code, 0) << solve.err;
  const testing::CommandResult timeline =
      run_remat("simulate " + ok + " " + dir + "/plan.json --timeline");
  EXPECT_NE(timeline.out.find("0 x\\ny 100\n1 z\\x1b[2J 200\n"), std::string::npos) << timeline.out;
  for (const std::string& out : {bad.err, info.out, timeline.out}) {
    EXPECT_EQ(out.find('\x1b'), std::string::npos);
    EXPECT_EQ(out.find("\xc2\x9b"), std::string::npos);
  }
}

TEST(CliHostile, BudgetsAreExactBytesAndDecimalOnly) {
  expect_one_error_line(run_remat("solve " + kLateUse + " --budget 4611686018427387905"),
                        "budget '4611686018427387905' is above the limit of 2^62 bytes");
  expect_one_error_line(run_remat("solve " + kLateUse + " --budget 0x10"), "invalid budget '0x10'");
  EXPECT_EQ(
      run_remat("solve " + kLateUse + " --budget 4611686018427387904 --solver none").exit_code, 0);
}

TEST(CliHostile, PlanOnStandardOutputIsTheJsonAlone) {
  const testing::CommandResult r = run_remat("solve " + kLateUse + " --solver none -o -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("{")) << r.out;
  EXPECT_EQ(r.out.find("solver    "), std::string::npos) << r.out;  // no summary after it
  const std::string dir = testing::temp_dir("cli_plan_stdout");
  write_file(dir, "plan.json", r.out);
  EXPECT_EQ(run_remat("simulate " + kLateUse + " " + dir + "/plan.json").exit_code, 0);
  // --json with -o - prints it once.
  const testing::CommandResult json = run_remat("solve " + kLateUse + " --solver none -o - --json");
  const auto count = [](const std::string& text) {
    size_t n = 0;
    for (size_t at = text.find("\"remat-plan\""); at != std::string::npos;
         at = text.find("\"remat-plan\"", at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count(json.out), 1u) << json.out;
}

TEST(CliHostile, AnEmptyOutputNameIsAnError) {
  const std::string dir = testing::temp_dir("cli_empty_output");
  for (const std::string& args :
       {"solve " + kLateUse + " -o ''", std::string("gen random-layered --nodes 5 -o ''"),
        "sweep " + kLateUse + " --points 2 --plot ''", "convert " + kLateUse + " ''"}) {
    SCOPED_TRACE(args);
    const testing::CommandResult r = run_remat(args);
    expect_one_error_line(r, "the file name is empty");
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(CliHostile, WritingThePlanOverTheInputGraphIsRefused) {
  const std::string dir = testing::temp_dir("cli_overwrite");
  const std::string graph = dir + "/g.json";
  fs::copy_file(kLateUse, graph);
  const std::string before = read_file(graph);
  for (const std::string& args :
       {"solve " + graph + " -o " + graph,
        "solve " + graph + " -o " + dir + "/../" + fs::path(dir).filename().string() + "/g.json",
        "sweep " + graph + " --points 2 --plot " + graph}) {
    SCOPED_TRACE(args);
    expect_one_error_line(run_remat(args), "is the input file");
  }
  EXPECT_EQ(read_file(graph), before);
}

TEST(CliHostile, InputsThatNeverEndAreRefused) {
  const std::string dir = testing::temp_dir("cli_endless");
  // Under `timeout`: reading them to the end takes all memory.
  for (const std::string args : {"info /dev/zero", "info /dev/urandom", "info - </dev/zero"}) {
    SCOPED_TRACE(args);
    const Raw r = run_raw(args, dir, "timeout 5 ");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("is a device, not a file"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(CliHostile, NumbersAbove2To63AreReportedAsWritten) {
  const std::string dir = testing::temp_dir("cli_big_numbers");
  const std::string size = write_file(dir, "size.json", R"({"format":"remat-graph","version":1,
    "values":[{"id":0,"size":9223372036854775808,"output":true}],
    "nodes":[{"id":0,"cost":1,"outputs":[0]}]})");
  expect_one_error_line(run_remat("info " + size),
                        "value 0: field 'size' is 9223372036854775808, above the largest integer");
  const std::string id = write_file(dir, "id.json", R"({"format":"remat-graph","version":1,
    "values":[{"id":0,"size":1,"output":true}],
    "nodes":[{"id":0,"cost":1,"outputs":[18446744073709551615]}]})");
  expect_one_error_line(run_remat("info " + id), "refers to value 18446744073709551615");
  const std::string plan = write_file(dir, "plan.json", R"({"format": "remat-plan", "version": 1,
    "sequence": [18446744073709551615]})");
  expect_one_error_line(run_remat("simulate " + kLateUse + " " + plan),
                        "node id 18446744073709551615 does not exist");
}

}  // namespace
}  // namespace remat
