// graph_fingerprint: two independent 64-bit lanes over a canonical byte stream of the graph.
#include <fmt/format.h>

#include <bit>
#include <cstring>

#include "remat/graph.h"

namespace remat {
namespace {

class Hasher {
 public:
  void add(uint64_t word) {
    low_ = mix(low_ ^ word);
    high_ = mix(high_ + word * 0x9e3779b97f4a7c15ULL);
  }
  void add(int64_t word) { add(static_cast<uint64_t>(word)); }
  void add(double number) { add(std::bit_cast<uint64_t>(number)); }
  void add(std::string_view text) {
    add(static_cast<uint64_t>(text.size()));
    for (size_t i = 0; i < text.size(); i += 8) {
      uint64_t word = 0;
      std::memcpy(&word, text.data() + i, std::min<size_t>(8, text.size() - i));
      add(word);
    }
  }
  std::string hex() const { return fmt::format("{:016x}{:016x}", high_, low_); }

 private:
  // splitmix64's finaliser: every input bit affects every output bit.
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t low_ = 0x6a09e667f3bcc908ULL;
  uint64_t high_ = 0xbb67ae8584caa73bULL;
};

}  // namespace

std::string graph_fingerprint(const Graph& graph) {
  Hasher h;
  h.add(static_cast<int64_t>(graph.num_values()));
  for (const Value& v : graph.values()) {
    h.add(v.name);
    h.add(v.size_bytes);
    h.add(static_cast<int64_t>(v.is_output));
  }
  h.add(static_cast<int64_t>(graph.num_nodes()));
  for (const Node& n : graph.nodes()) {
    h.add(n.name);
    h.add(n.op);
    h.add(n.cost);
    // Not the node's temp bytes: they are the workspace a device's libraries take, measured on
    // a GPU and unknown to a trace on fake tensors, and a plan stays valid whatever they are (its
    // peak is simulated again where it is read). The slot keeps earlier fingerprints.
    h.add(int64_t{0});
    h.add(static_cast<int64_t>(n.kind) * 16 + static_cast<int64_t>(n.phase) * 2 +
          static_cast<int64_t>(n.recomputable));
    h.add(static_cast<int64_t>(n.inputs.size()));
    for (ValueId v : n.inputs) h.add(static_cast<int64_t>(v.value()));
    h.add(static_cast<int64_t>(n.outputs.size()));
    for (ValueId v : n.outputs) h.add(static_cast<int64_t>(v.value()));
  }
  return h.hex();
}

}  // namespace remat
