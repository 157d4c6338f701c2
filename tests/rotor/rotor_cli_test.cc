// `remat info / solve / compare / sweep / simulate / gen chain` on chain files: the one dispatch on
// the file kind; and rotor's and rockmate's notes on a graph with one large block. Assertions on
// --json output, not on column spacing.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "remat/io.h"
#include "testing/layered_joint.h"
#include "testing/testing.h"

namespace remat {
namespace {

using nlohmann::json;
using testing::run_remat;

const std::string kToy = std::string(REMAT_SOURCE_DIR) + "/examples/rotor_toy.json";

json json_of(const std::string& args) {
  const auto r = run_remat(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  return json::parse(r.out);
}

TEST(RotorCli, SolveWritesPlanThatSimulates) {
  const std::string dir = testing::temp_dir("rotor_cli_solve");
  const std::string plan = dir + "/plan.json";
  const json solved = json_of("solve " + kToy + " --solver rotor --budget 90MiB -o " + plan);
  EXPECT_NEAR(solved["makespan"].get<double>(), 47.42, 1e-9);  // Table 2
  EXPECT_EQ(solved["sequence"].get<std::string>().rfind("F1ck F2∅ F3∅ F4all", 0), 0u);
  EXPECT_EQ(solved["status"], "feasible");
  EXPECT_EQ(read_text_file(plan), solved.dump(1) + "\n");
  const json sim = json_of("simulate " + kToy + " " + plan);
  EXPECT_EQ(sim["peak_bytes"], 90963969);
  EXPECT_NEAR(sim["cost"].get<double>(), 47.42, 1e-9);
}

TEST(RotorCli, OverBudgetIsAResultAndOnlyAProofIsAnError) {
  const std::string dir = testing::temp_dir("rotor_cli_infeasible");
  const std::string plan = dir + "/plan.json";
  // The persistent families prove nothing below their least budget: their lowest-peak plan comes
  // back, status over-budget, exit 0, with the least budget they can meet.
  for (const char* solver : {"rotor", "revolve", "sequential"}) {
    const json r = json_of("solve " + kToy + " --solver " + solver + " --budget 50MiB");
    EXPECT_EQ(r["status"], "over-budget") << solver;
    EXPECT_GT(r["min_feasible_budget_bytes"].get<int64_t>(), 50 << 20) << solver;
    EXPECT_FALSE(r["feasible"].get<bool>());
  }
  // The weak DP proves it for every sequence (Lemma 4.4): exit 2, nothing written.
  const auto r = run_remat("solve " + kToy +
                           " --solver rotor --param persistence=weak --budget 50MiB -o " + plan);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "remat: error: budget 52428800 bytes (52.43 MB) is below the smallest budget any plan "
            "can meet on " +
                kToy + ": 86109062 bytes (86.11 MB), proved by rotor\n");
  EXPECT_FALSE(std::filesystem::exists(plan));
}

TEST(RotorCli, BadParametersAndGraphSolversExitTwo) {
  const auto r = run_remat("solve " + kToy + " --solver rotor --param persistence=soft");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(
      r.err,
      "remat: error: rotor: invalid value 'soft' for parameter 'persistence' (expected strong "
      "or weak)\n");
  const auto fastsa = run_remat("solve " + kToy + " --solver fastsa");
  EXPECT_EQ(fastsa.exit_code, 2);
  EXPECT_EQ(fastsa.err, "remat: error: solver 'fastsa' takes graphs, not chains\n");
}

TEST(RotorCli, InfoCompareSweepGen) {
  const json info = json_of("info " + kToy);
  EXPECT_NEAR(info["store_all_makespan"].get<double>(), 37.38, 1e-9);
  EXPECT_EQ(info["store_all_peak_bytes"], 112187147);
  EXPECT_EQ(info["least_budget_persistent_bytes"], 86109062);
  // compare marks the row of a solver that takes no chains and runs the others.
  const json compare =
      json_of("compare " + kToy + " --budgets 100%,90MiB --solvers rotor,fastsa,store-all,auto");
  ASSERT_EQ(compare.size(), 8u);
  EXPECT_EQ(compare[0]["status"], "optimal");  // store-all fits at 100 %
  EXPECT_NEAR(compare[1]["cost"].get<double>(), 47.42, 1e-9);
  EXPECT_EQ(compare[2]["status"], "not-applicable");
  EXPECT_EQ(compare[5]["status"], "over-budget");              // store-all at 90 MiB
  EXPECT_NEAR(compare[7]["cost"].get<double>(), 47.42, 1e-9);  // auto: rotor's plan
  const json sweep = json_of("sweep " + kToy + " --solver rotor --points 3");
  ASSERT_EQ(sweep.size(), 3u);
  EXPECT_EQ(sweep[0]["peak_bytes"], 86109062);  // the least peak rotor reaches
  EXPECT_EQ(sweep[2]["cost_increase_percent"], 0.0);
  const std::string dir = testing::temp_dir("rotor_cli_gen");
  const auto gen = run_remat("gen chain --kind resnet -L 12 --seed 4 -o " + dir + "/c.json");
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_EQ(read_chain_file(dir + "/c.json").length(), 12);
  EXPECT_EQ(run_remat("gen chain --kind mlp").exit_code, 2);
  EXPECT_EQ(json_of("solve " + dir + "/c.json --solver rotor --budget 60%")["status"], "feasible");
}

// 16 layers all reading one value larger than what a layer makes: all but the embedding is one
// block. Whoever asks, rotor and rockmate say why, naming the value, beside their plan.
TEST(RotorCli, OneLargeBlockIsExplainedWhereverAPlanIsShown) {
  const std::string dir = testing::temp_dir("rotor_cli_one_block");
  const std::string graph = dir + "/crossing.json";
  write_graph_file(graph, testing::layered_joint({.layers = 16, .crossing_bytes = 16 * 4096}));
  const std::string why = "value 'crossing'";
  for (const std::string solver : {"rotor", "rockmate --param milp=false"}) {
    const std::string args = "solve " + graph + " --solver " + solver + " --budget 50%";
    const auto text = run_remat(args);
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("note      145 of the 150 forward nodes are one stage"),
              std::string::npos)
        << text.out;
    const json plan = json_of(args);
    ASSERT_TRUE(plan["stats"]["lists"].contains("notes")) << solver;
    EXPECT_NE(plan["stats"]["lists"]["notes"][0].get<std::string>().find(why), std::string::npos);
  }
  const auto blocks = run_remat("info " + graph + " --blocks");
  EXPECT_NE(blocks.out.find("note             145 of the 150"), std::string::npos) << blocks.out;
  EXPECT_NE(json_of("info " + graph + " --blocks")["notes"][0].get<std::string>().find(why),
            std::string::npos);
  const auto table = run_remat("compare " + graph + " --solvers rotor,none --budgets 50%");
  EXPECT_NE(table.out.find("* note: rotor: 145 of the 150"), std::string::npos) << table.out;
  const json rows = json_of("compare " + graph + " --solvers rotor,none --budgets 50%");
  EXPECT_NE(rows[0]["notes"][0].get<std::string>().find(why), std::string::npos);
  EXPECT_FALSE(rows[1].contains("notes"));  // the default schedule has no chain to explain
}

}  // namespace
}  // namespace remat
