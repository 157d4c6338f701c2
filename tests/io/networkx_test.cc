// The MOCCASIN / Checkmate data sets: the simulator reproduces the papers' baseline peaks.
#include <gtest/gtest.h>

#include "remat/error.h"
#include "remat/io.h"
#include "remat/simulate.h"
#include "testing/testing.h"

namespace remat {
namespace {

struct Reference {
  const char* prefix;
  int32_t nodes;
  int64_t edges;
  int64_t peak;
  double cost;
};

// The MOCCASIN data set's graphs (RL 1-4, CM 1-2): their published sizes.
constexpr Reference kReferences[] = {
    {"random_layered_n100_", 100, 236, 46'319, 47'769},
    {"random_layered_n250_", 250, 944, 146'840, 125'569},
    {"random_layered_n500_", 500, 2461, 284'439, 255'302},
    {"random_layered_n1000_", 1000, 5875, 608'619, 497'270},
    {"fcn_8_vgg_32_416_608_3_train", 73, 149, 13'484'795'520, 10'275'337'746'048.0},
    {"ResNet50_256_224_224_3_train", 353, 751, 38'059'356'160, 405'670},
};

TEST(Networkx, ReproducesPublishedBaselinePeaks) {
  const auto dir = testing::bench_data_dir();
  if (!dir)
    GTEST_SKIP() << "benchmark data not found: set REMAT_BENCH_DATA or provide "
                    "../shared/benchmarks/moccasin";
  for (const Reference& ref : kReferences) {
    SCOPED_TRACE(ref.prefix);
    const Graph g = read_graph_file(testing::bench_file(*dir, ref.prefix));
    EXPECT_EQ(g.num_nodes(), ref.nodes);
    EXPECT_EQ(g.total_input_count(), ref.edges);
    const Baseline b = baseline(g);
    EXPECT_EQ(b.peak_bytes, ref.peak);
    EXPECT_DOUBLE_EQ(b.cost, ref.cost);
  }
}

TEST(Networkx, RandomLayeredUsesOrderAttribute) {
  const auto dir = testing::bench_data_dir();
  if (!dir) GTEST_SKIP() << "benchmark data not found";
  const Graph g = read_graph_file(testing::bench_file(*dir, "random_layered_n100_"));
  // order starts 0, 3, 2, 9 and ends with the single sink 1.
  EXPECT_EQ(g.node(NodeId{0}).name, "0");
  EXPECT_EQ(g.node(NodeId{1}).name, "3");
  EXPECT_EQ(g.node(NodeId{2}).name, "2");
  EXPECT_EQ(g.node(NodeId{99}).name, "1");
  ASSERT_EQ(g.graph_outputs().size(), 1u);
  EXPECT_TRUE(g.graph_inputs().empty());
}

TEST(Networkx, CheckmateFlavourHasPhases) {
  const auto dir = testing::bench_data_dir();
  if (!dir) GTEST_SKIP() << "benchmark data not found";
  const Graph g = read_graph_file(testing::bench_file(*dir, "fcn_8_vgg_32_416_608_3_train"));
  EXPECT_EQ(g.node(NodeId{0}).name, "block1_conv1");
  EXPECT_EQ(g.node(NodeId{0}).phase, Phase::kForward);
  EXPECT_EQ(g.node(NodeId{g.num_nodes() - 1}).phase, Phase::kBackward);
}

std::string import_error(std::string_view text) {
  return testing::input_error_of([&] { import_networkx_json(text, "nx.json"); });
}

TEST(Networkx, BadFilesAreNamed) {
  EXPECT_EQ(
      import_error(
          R"({"nodes": [{"id": 0, "cost_ram": 1, "cost_cpu": 1}], "links": [{"source": 0, "target": 5}]})"),
      "nx.json: link at index 0 refers to node 5, which does not exist");
  EXPECT_EQ(import_error(R"({"nodes": [{"id": 0, "cost_ram": -1, "cost_cpu": 1}], "links": []})"),
            "nx.json: value 0 ('0') has negative size -1");
  EXPECT_EQ(
      import_error(
          R"({"nodes": [{"id": 0, "cost_ram": 1, "cost_cpu": 1}, {"id": 1, "cost_ram": 1, "cost_cpu": 1}],
      "links": [{"source": 0, "target": 1}, {"source": 1, "target": 0}]})"),
      "nx.json: the graph has a cycle: '0' -> '1' -> '0'");
  EXPECT_EQ(
      import_error(
          R"({"graph": {"order": [0]}, "nodes": [{"name": 0, "out_cost": 1, "duration": 1}, {"name": 1, "out_cost": 1, "duration": 1}], "links": []})"),
      "nx.json: graph attribute 'order' lists 1 nodes, the graph has 2");
}

}  // namespace
}  // namespace remat
