// Graph → chain extraction and lowering (remat/lower.h) on generated joint graphs and on
// hand-built layered ones in other tracers' shapes (late helper views, values every layer reads);
// the traced PyTorch models are covered by python/tests/test_graph_chain.py.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "remat/error.h"
#include "remat/generate.h"
#include "remat/io.h"
#include "remat/lower.h"
#include "remat/registry.h"
#include "remat/simulate.h"
#include "testing/layered_joint.h"
#include "testing/testing.h"

namespace remat {
namespace {

std::vector<StageRun> runs_of(const ChainSequence& ops) {
  std::vector<StageRun> runs;
  for (const ChainOp& op : ops) runs.push_back({op.stage, op.kind == ChainOpKind::kBackward});
  return runs;
}

class JointChain : public ::testing::TestWithParam<uint64_t> {};

TEST_P(JointChain, EveryNodeInOneStageAndStoreAllIsTheBaseline) {
  const Graph g = generate_joint({.num_nodes = 400, .seed = GetParam()});
  const GraphChain gc = extract_chain(g);
  ASSERT_GE(gc.chain.stages.size(), 2u);
  std::vector<int> seen(static_cast<size_t>(g.num_nodes()), 0);
  for (const StageNodes& s : gc.stages) {
    for (NodeId n : s.forward) ++seen[static_cast<size_t>(n.value())];
    for (NodeId n : s.backward) ++seen[static_cast<size_t>(n.value())];
  }
  for (int count : seen) EXPECT_EQ(count, 1);
  const Evaluation e = simulate(g, lower_chain_plan(g, gc, store_all_runs(gc)));
  ASSERT_TRUE(e.valid) << e.error;
  const Baseline base = baseline(g);
  EXPECT_EQ(e.cost, base.cost);
  EXPECT_LE(e.peak_bytes, base.peak_bytes);
}

TEST_P(JointChain, LoweredRotorPlanFitsWhenTheChainPlanFits) {
  const Graph g = generate_joint({.num_nodes = 400, .seed = GetParam()});
  const GraphChain gc = extract_chain(g);
  const int64_t base_peak = baseline(g).peak_bytes;
  for (int percent : {90, 70, 50, 40}) {
    const int64_t budget = base_peak * percent / 100;
    SolveOptions options;
    options.budget = {std::max<int64_t>(0, budget - gc.resident_bytes)};
    const ChainSolveResult r = solve(gc.chain, "rotor", options);
    const Evaluation e = simulate(g, lower_chain_plan(g, gc, runs_of(r.plan.sequence)));
    ASSERT_TRUE(e.valid) << e.error;
    EXPECT_NEAR(e.cost, r.eval.cost + gc.fixed_cost, 1e-9 * e.cost);
    if (r.eval.peak_bytes <= options.budget.bytes) {
      EXPECT_LE(e.peak_bytes, budget) << percent;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, JointChain, ::testing::Values(1, 2, 3));

TEST(ChainExtract, GraphWithoutPhasesIsUnsupported) {
  const Graph g = generate_random_layered({.num_nodes = 50, .seed = 1});
  try {
    (void)extract_chain(g);
    FAIL() << "no error";
  } catch (const UnsupportedGraph& e) {
    EXPECT_NE(std::string(e.what()).find("has no phase"), std::string::npos) << e.what();
  }
}

using testing::layered_joint;
using testing::LayeredJointOptions;

std::vector<std::string> separator_names(const Graph& g, const GraphChain& gc) {
  std::vector<std::string> names;
  for (NodeId n : gc.separators) names.push_back(g.node(n).name);
  return names;
}

ValueId value_named(const Graph& g, std::string_view name) {
  const std::optional<ValueId> v = g.find_value(name);
  EXPECT_TRUE(v.has_value()) << name;
  return v.value_or(ValueId{0});
}

// Every node in one stage; store-all lowers to the default schedule's cost; and at every budget
// where rotor's chain plan fits the chain's budget, its lowered plan fits the graph's (the chain's
// peak plus the resident bytes bounds the simulator's).
void expect_chain_bounds_the_graph(const Graph& g, const GraphChain& gc) {
  std::vector<int> seen(static_cast<size_t>(g.num_nodes()), 0);
  for (const StageNodes& s : gc.stages) {
    for (NodeId n : s.forward) ++seen[static_cast<size_t>(n.value())];
    for (NodeId n : s.backward) ++seen[static_cast<size_t>(n.value())];
  }
  for (int count : seen) EXPECT_EQ(count, 1);
  const Evaluation store_all = simulate(g, lower_chain_plan(g, gc, store_all_runs(gc)));
  ASSERT_TRUE(store_all.valid) << store_all.error;
  EXPECT_EQ(store_all.cost, baseline(g).cost);
  EXPECT_LE(store_all.peak_bytes,
            simulate_chain(gc.chain, store_all_sequence(gc.chain)).peak_bytes + gc.resident_bytes);
  int fitted = 0;
  for (int percent : {90, 70, 50, 40, 30}) {
    const int64_t budget = baseline(g).peak_bytes * percent / 100;
    SolveOptions options;
    options.budget = {std::max<int64_t>(0, budget - gc.resident_bytes)};
    const ChainSolveResult r = solve(gc.chain, "rotor", options);
    const Evaluation e = simulate(g, lower_chain_plan(g, gc, runs_of(r.plan.sequence)));
    ASSERT_TRUE(e.valid) << e.error;
    EXPECT_LE(e.peak_bytes, r.eval.peak_bytes + gc.resident_bytes) << percent;
    if (r.eval.peak_bytes <= options.budget.bytes) {
      ++fitted;
      EXPECT_LE(e.peak_bytes, budget) << percent;
    }
  }
  EXPECT_GT(fitted, 0);
}

TEST(ChainExtract, HelperViewsAtTheEndOfTheForwardGiveTheSameStages) {
  // A tracer that sets phases by data flow puts the transposed activations and weights that the
  // backward reads at the end of the forward: every activation then had a forward reader after
  // the last layer, and the forward was one stage.
  const Graph early = layered_joint({.layers = 4});
  const Graph late = layered_joint({.layers = 4, .late_views = true});
  const GraphChain a = extract_chain(early), b = extract_chain(late);
  EXPECT_EQ(b.chain.stages.size(), 8u);  // embedding, GELU, four layers, final norm, head
  EXPECT_EQ(separator_names(late, b), separator_names(early, a));
  EXPECT_TRUE(b.note.empty()) << b.note;
  for (const char* view : {"t_h_layer0", "t_d_layer2", "t_W2_layer3"}) {
    const NodeId n = *late.find_node(view);
    EXPECT_TRUE(b.backward_helper[n]) << view;
    EXPECT_EQ(b.stage_of[n], a.stage_of[*early.find_node(view)]) << view;
  }
  expect_chain_bounds_the_graph(late, b);
}

TEST(ChainExtract, ASmallValueEveryLayerReadsIsSharedNotAMerge) {
  for (const bool late : {false, true}) {
    const Graph g = layered_joint({.layers = 4, .late_views = late, .shared_mask = true});
    const GraphChain gc = extract_chain(g);
    EXPECT_EQ(gc.chain.stages.size(), 8u) << ::testing::PrintToString(separator_names(g, gc));
    const ValueId mask = value_named(g, "mask");
    EXPECT_TRUE(gc.shared[mask]);
    for (const StageNodes& s : gc.stages)  // resident: in no stage's sizes
      for (const std::vector<ValueId>* list : {&s.output, &s.saved})
        EXPECT_EQ(std::count(list->begin(), list->end(), mask), 0);
    int64_t inputs = 0;
    for (ValueId v : g.graph_inputs()) inputs += g.value(v).size_bytes;
    EXPECT_EQ(gc.resident_bytes,
              inputs + g.value(mask).size_bytes + g.value(value_named(g, "loss")).size_bytes);
    expect_chain_bounds_the_graph(g, gc);
  }
}

TEST(ChainExtract, AnEncoderOutputEveryDecoderLayerReadsIsAnInputOfEachDecoderStage) {
  const Graph g = layered_joint({.layers = 4, .encoder_layers = 2});
  const GraphChain gc = extract_chain(g);
  // embedding, GELU, 2 encoder layers, final norm and decoder embedding, GELU, 4 decoder layers,
  // final norm, head and loss
  EXPECT_EQ(gc.chain.stages.size(), 12u) << ::testing::PrintToString(separator_names(g, gc));
  EXPECT_TRUE(gc.shared[value_named(g, "h_enc_final")]);
  expect_chain_bounds_the_graph(g, gc);
}

TEST(ChainExtract, ALargeValueEveryLayerReadsIsNamed) {
  // 16 layers: more than 100 forward nodes, of which all but the embedding's are one stage,
  // because 'crossing' (larger than what a layer makes) is read by every layer.
  const Graph g = layered_joint({.layers = 16, .crossing_bytes = 16 * 4096});
  const GraphChain gc = extract_chain(g);
  EXPECT_EQ(gc.chain.stages.size(), 5u);  // embedding, GELU, the layers, final norm, head
  EXPECT_NE(gc.note.find("value 'crossing' (65.54 KB, made by 'crossing'"), std::string::npos)
      << gc.note;
  EXPECT_NE(gc.note.find("too large to keep resident"), std::string::npos) << gc.note;
  EXPECT_FALSE(gc.shared[value_named(g, "crossing")]);
  // Read by the loss too: no forward node separates anything, and the error names it.
  const std::string error = remat::testing::input_error_of([] {
    (void)extract_chain(
        layered_joint({.layers = 16, .crossing_bytes = 16 * 4096, .crossing_everywhere = true}));
  });
  EXPECT_NE(error.find("fewer than 2 stages"), std::string::npos) << error;
  EXPECT_NE(error.find("value 'crossing'"), std::string::npos) << error;
}

TEST(ChainExtract, CorpusGraphsFromOtherTracersAreBoundByTheirChains) {
  // bench/block_corpus.py's graphs: late helper views, plain make_fx, AOTAutograd's joint graphs
  // and Hugging Face models through torch.compile (masks, rotary tables, position biases and
  // encoder outputs read by every layer, the work that makes them from graph inputs alone moved
  // to stage 1, the embedding's gradients placed with it). Rockmate's placement of the
  // backward nodes no forward value binds (floating_late) is judged the same way.
  for (const char* name : {"gpt4_late_views", "llama4_make_fx", "gpt4_aot", "llama4_aot", "hf_gpt2",
                           "hf_llama", "hf_bert", "hf_t5", "hf_vit"}) {
    const Graph g =
        read_graph_file(std::string(REMAT_SOURCE_DIR) + "/tests/data/blocks/" + name + ".json");
    for (const bool late : {false, true}) {
      SCOPED_TRACE(::testing::Message() << name << (late ? ", floating_late" : ""));
      const GraphChain gc = extract_chain(g, {.floating_late = late});
      EXPECT_GE(gc.chain.stages.size(), 11u);  // two per layer, the embedding and the head
      EXPECT_TRUE(gc.note.empty()) << gc.note;
      expect_chain_bounds_the_graph(g, gc);
    }
  }
}

// A training graph in the Checkmate/MOCCASIN data sets' format: a chain of four layers and a loss
// that is no graph output, read only by the first backward node.
std::string chain_in_networkx_format() {
  std::string nodes, links;
  const auto node = [&](int id, const std::string& name, bool backward) {
    nodes += fmt::format(R"({}{{"id": {}, "name": "{}", "backward": {}, "cost_cpu": 10, )"
                         R"("cost_ram": 1000}})",
                         nodes.empty() ? "" : ", ", id, name, backward ? "true" : "false");
  };
  const auto link = [&](int from, int to) {
    links +=
        fmt::format(R"({}{{"source": {}, "target": {}}})", links.empty() ? "" : ", ", from, to);
  };
  for (int i = 0; i < 5; ++i) node(i, i < 4 ? fmt::format("layer{}", i) : "loss", false);
  for (int i = 0; i < 5; ++i) node(5 + i, fmt::format("grad{}", 4 - i), true);
  for (int i = 0; i < 4; ++i) link(i, i + 1);      // the forward chain
  for (int i = 0; i < 4; ++i) link(5 + i, 6 + i);  // the backward chain
  for (int i = 0; i < 4; ++i) link(3 - i, 6 + i);  // each gradient reads its layer's input
  link(4, 5);                                      // the loss's gradient reads the loss
  return fmt::format(R"({{"directed": true, "multigraph": false, "graph": {{}}, "nodes": [{}], )"
                     R"("links": [{}]}})",
                     nodes, links);
}

// A loss head in the shape of AOTAutograd's graph of a GPT: a fused group makes the log-softmax
// (read only by the backward) and two small values; the token count is made from one of them
// after the group, and the loss from the count. The backward's fused group reads the count and
// the log-softmax, so it must run in the count's stage while the log-softmax, crossing no cut,
// binds it to the group's: the two stages are merged (it was "no usable chain structure").
Graph loss_head_after_its_log_softmax() {
  GraphSpec spec;
  spec.name = "loss_head";
  auto value = [&](std::string name, int64_t size, bool output = false) {
    spec.values.push_back({.name = std::move(name), .size_bytes = size, .is_output = output});
    return ValueId{static_cast<int32_t>(spec.values.size() - 1)};
  };
  auto node = [&](std::string name, Phase phase, std::vector<ValueId> in,
                  std::vector<ValueId> out) {
    spec.nodes.push_back({.name = std::move(name),
                          .cost = 10,
                          .inputs = std::move(in),
                          .outputs = std::move(out),
                          .kind = OpKind::kPointwise,
                          .phase = phase});
  };
  const ValueId x = value("x", 1000), w1 = value("w1", 100), w2 = value("w2", 100);
  const ValueId h1 = value("h1", 1000), h2 = value("h2", 1000), h3 = value("h3", 1000);
  const ValueId logp = value("logp", 1000), s1 = value("s1", 4), s2 = value("s2", 4);
  const ValueId count = value("count", 4), loss = value("loss", 4, true);
  const ValueId d3 = value("d3", 1000), d2 = value("d2", 1000), d1 = value("d1", 1000);
  const ValueId g1 = value("g1", 100, true), g2 = value("g2", 100, true);
  node("layer1", Phase::kForward, {x, w1}, {h1});
  node("layer2", Phase::kForward, {h1, w2}, {h2});
  node("layer3", Phase::kForward, {h2}, {h3});
  node("log_softmax", Phase::kForward, {h3}, {logp, s1, s2});
  node("count", Phase::kForward, {s1}, {count});
  node("loss", Phase::kForward, {s2, count}, {loss});
  node("loss_grad", Phase::kBackward, {count, logp, s2}, {d3});
  node("layer3_grad", Phase::kBackward, {d3, h2}, {d2});
  node("layer2_grad", Phase::kBackward, {d2, h1}, {d1, g2});
  node("layer1_grad", Phase::kBackward, {d1, x}, {g1});
  return Graph::build(std::move(spec), "loss_head");
}

TEST(ChainExtract, ABackwardReadingACountAndALogSoftmaxOfTwoStagesMergesThem) {
  const Graph g = loss_head_after_its_log_softmax();
  const GraphChain gc = extract_chain(g);
  const NodeId log_softmax = *g.find_node("log_softmax"), count = *g.find_node("count");
  EXPECT_EQ(gc.stage_of[log_softmax], gc.stage_of[count]);
  EXPECT_EQ(gc.stage_of[*g.find_node("loss_grad")], gc.stage_of[count]);
  EXPECT_GE(gc.chain.stages.size(), 3u) << ::testing::PrintToString(separator_names(g, gc));
  const Evaluation store_all = simulate(g, lower_chain_plan(g, gc, store_all_runs(gc)));
  ASSERT_TRUE(store_all.valid) << store_all.error;
  EXPECT_EQ(store_all.cost, baseline(g).cost);
}

TEST(ChainExtract, ALossThatIsNoGraphOutputStaysInTheForward) {
  // A forward node that only the backward reads is backward work; applied to a loss that is no
  // graph output it took every node before the loss along, and the extraction then read an empty
  // forward.
  const Graph g = import_networkx_json(chain_in_networkx_format(), "chain.json");
  const GraphChain gc = extract_chain(g);
  EXPECT_GE(gc.chain.stages.size(), 4u);
  expect_chain_bounds_the_graph(g, gc);
}

TEST(ChainExtract, DataSetTrainingGraphsGiveAChainOrSayWhyNot) {
  const auto dir = testing::bench_data_dir();
  if (!dir) GTEST_SKIP() << "benchmark data not found";
  int chains = 0;
  for (const char* prefix :
       {"MobileNet_512_224_224_3_train", "ResNet50_256_224_224_3_train",
        "VGG16_256_224_224_3_train", "VGG19_256_224_224_3_train", "fcn_8_vgg_32_416_608_3_train",
        "segnet_32_416_608_3_train", "vgg_unet_32_416_608_3_train"}) {
    SCOPED_TRACE(prefix);
    const Graph g = read_graph_file(testing::bench_file(*dir, prefix));
    try {
      const GraphChain gc = extract_chain(g);
      expect_chain_bounds_the_graph(g, gc);
      ++chains;
    } catch (const UnsupportedGraph& e) {
      EXPECT_NE(std::string(e.what()).find("chain structure"), std::string::npos) << e.what();
    }
  }
  EXPECT_GE(chains, 6);
}

TEST(ChainExtract, FewLayersWithALargeCrossingValueHaveNoNote) {
  // Below 100 forward nodes one large stage is no surprise worth a note; the chain still bounds.
  const Graph g = layered_joint({.layers = 4, .crossing_bytes = 16 * 4096});
  const GraphChain gc = extract_chain(g);
  EXPECT_TRUE(gc.note.empty()) << gc.note;
  expect_chain_bounds_the_graph(g, gc);
}

}  // namespace
}  // namespace remat
