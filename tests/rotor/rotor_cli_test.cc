// `remat info / solve / compare / simulate / gen chain` on chain files.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "remat/io.h"
#include "rotor/chain_solver.h"
#include "testing/testing.h"

namespace remat::rotor {
namespace {

using testing::run_remat;

const std::string kToy = std::string(REMAT_SOURCE_DIR) + "/examples/rotor_toy.json";

TEST(RotorCli, SolveWritesPlanThatSimulates) {
  const std::string dir = testing::temp_dir("rotor_cli_solve");
  const std::string plan = dir + "/plan.json";
  const auto r = run_remat("solve " + kToy + " --solver rotor --budget 90MiB -o " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("makespan  47.42"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("F1ck F2∅ F3∅ F4all"), std::string::npos) << r.out;
  const std::string text = read_text_file(plan);
  EXPECT_NE(text.find("\"format\": \"remat-chain-plan\""), std::string::npos);
  const auto sim = run_remat("simulate " + kToy + " " + plan + " --json");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_NE(sim.out.find("\"peak_bytes\": 90963969"), std::string::npos) << sim.out;
}

TEST(RotorCli, InfeasibleBudgetNamesTheSmallestFeasibleBudget) {
  const std::string dir = testing::temp_dir("rotor_cli_infeasible");
  const std::string plan = dir + "/plan.json";
  for (const char* solver : {"rotor", "rotor --param persistence=weak", "revolve", "sequential"}) {
    const auto r =
        run_remat("solve " + kToy + " --solver " + solver + " --budget 50MiB -o " + plan);
    EXPECT_EQ(r.exit_code, 2) << solver;
    EXPECT_NE(r.err.find("is below the smallest budget"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(plan));
  }
  const auto r = run_remat("solve " + kToy + " --solver rotor --budget 50MiB");
  EXPECT_EQ(r.err,
            "remat: error: budget 52428800 bytes (50.00 MiB) is below the smallest budget rotor "
            "can meet on " +
                kToy + ": 86109062 bytes (82.12 MiB)\n");
}

TEST(RotorCli, BadParametersExitTwo) {
  const auto r = run_remat("solve " + kToy + " --solver rotor --param persistence=soft");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(
      r.err,
      "remat: error: rotor: invalid value 'soft' for parameter 'persistence' (expected strong "
      "or weak)\n");
  EXPECT_EQ(run_remat("solve " + kToy + " --solver fastsa").exit_code, 2);
}

TEST(RotorCli, InfoCompareGen) {
  const auto info = run_remat("info " + kToy);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("makespan 37.38, peak 112187147 bytes (106.99 MiB)"), std::string::npos)
      << info.out;
  const auto compare = run_remat(
      "compare " + kToy + " --budgets 100%,90MiB --solvers rotor,sequential,revolve,store-all");
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  EXPECT_NE(compare.out.find("47.42"), std::string::npos) << compare.out;
  const std::string dir = testing::temp_dir("rotor_cli_gen");
  const auto gen = run_remat("gen chain --kind resnet -L 12 --seed 4 -o " + dir + "/c.json");
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_EQ(read_chain_file(dir + "/c.json").length(), 12);
  EXPECT_EQ(run_remat("gen chain --kind mlp").exit_code, 2);
  const auto solved = run_remat("solve " + dir + "/c.json --solver rotor --budget 60% --json");
  ASSERT_EQ(solved.exit_code, 0) << solved.err;
  EXPECT_NE(solved.out.find("\"status\": \"feasible\""), std::string::npos) << solved.out;
}

}  // namespace
}  // namespace remat::rotor
