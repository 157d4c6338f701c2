// libFuzzer target: remat-graph JSON. A graph that loads has a non-negative baseline peak (byte
// sums stay exact) and survives a round trip through graph_to_json.
#include "fuzz_common.h"
#include "remat/io.h"
#include "remat/simulate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  remat::fuzz::expect_value_or_input_error([&] {
    const remat::Graph g = remat::parse_graph_json(remat::fuzz::as_text(data, size), "fuzz.json");
    const remat::Baseline base = remat::baseline(g);
    remat::fuzz::require(base.peak_bytes >= 0, "baseline peak >= 0");
    remat::fuzz::require(base.peak_bytes <= remat::kMaxTotalBytes, "baseline peak <= 2^62");
    const std::string text = remat::graph_to_json(g);
    const remat::Graph again = remat::parse_graph_json(text, "round-trip");
    remat::fuzz::require(again.num_nodes() == g.num_nodes(), "round trip keeps the nodes");
    remat::fuzz::require(remat::graph_fingerprint(again) == remat::graph_fingerprint(g),
                         "round trip keeps the content");
    remat::fuzz::require(remat::graph_to_json(again) == text, "round trip keeps the text");
  });
  return 0;
}
