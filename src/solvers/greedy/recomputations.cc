#include "recomputations.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>

#include "remat/error.h"

namespace remat::greedy {
namespace {

// Appends to `chain` the steps `step` needs (recursively, `depth` deep) and then `step`: a step
// whose input is read where it is (its producer is not a forward step, cannot run again, or
// makes a value the backward reads, so its first copy lives until then) is not added.
struct ChainBuilder {
  const Graph& graph;
  const std::vector<char>& forward;           // by node
  const std::vector<char>& read_in_backward;  // by value
  std::vector<int32_t>& in_chain;             // by node: the move index that added it
  int32_t move;

  void add(NodeId step, int depth, std::vector<NodeId>& chain) const {
    for (ValueId v : graph.node(step).inputs) {
      if (graph.is_graph_input(v)) continue;
      const NodeId p = graph.producer(v);
      const auto i = static_cast<size_t>(p.value());
      if (in_chain[i] == move || !forward[i] || depth == 0 ||
          read_in_backward[static_cast<size_t>(v.value())] || !graph.node(p).recomputable)
        continue;
      add(p, depth - 1, chain);
    }
    in_chain[static_cast<size_t>(step.value())] = move;
    chain.push_back(step);
  }
};

}  // namespace

Moves find_moves(const Graph& graph, std::span<const NodeId> sequence, int chain_depth) {
  const auto steps = static_cast<int32_t>(sequence.size());
  Moves result;
  const auto backward = std::find_if(sequence.begin(), sequence.end(), [&](NodeId n) {
    return graph.node(n).phase == Phase::kBackward;
  });
  result.backward_begin = static_cast<int32_t>(backward - sequence.begin());
  const auto nodes = static_cast<size_t>(graph.num_nodes());
  std::vector<char> forward(nodes, 0);
  std::vector<char> read_in_backward(static_cast<size_t>(graph.num_values()), 0);
  for (int32_t t = 0; t < steps; ++t) {
    const NodeId n = sequence[static_cast<size_t>(t)];
    if (t < result.backward_begin) forward[static_cast<size_t>(n.value())] = 1;
    if (t > result.backward_begin)
      for (ValueId v : graph.node(n).inputs) read_in_backward[static_cast<size_t>(v.value())] = 1;
  }
  std::vector<int32_t> in_chain(nodes, -1);
  std::vector<char> seen(nodes, 0);
  for (int32_t t = 0; t < result.backward_begin; ++t) {
    const NodeId n = sequence[static_cast<size_t>(t)];
    const Node& node = graph.node(n);
    if (std::exchange(seen[static_cast<size_t>(n.value())], 1) || !node.recomputable) continue;
    if (std::none_of(node.outputs.begin(), node.outputs.end(), [&](ValueId v) {
          return read_in_backward[static_cast<size_t>(v.value())] != 0;
        }))
      continue;
    Move move{.step = n};
    const ChainBuilder builder{graph, forward, read_in_backward, in_chain,
                               static_cast<int32_t>(result.moves.size())};
    builder.add(n, chain_depth, move.chain);
    for (NodeId s : move.chain) {
      move.cost += graph.node(s).cost;
      move.touches +=
          static_cast<int64_t>(graph.node(s).inputs.size() + graph.node(s).outputs.size());
    }
    result.moves.push_back(std::move(move));
  }
  return result;
}

InsertionPricer::InsertionPricer(const Graph& graph)
    : graph_(graph), slot_(static_cast<size_t>(graph.num_values()), -1) {}

int64_t InsertionPricer::index_ops(int64_t steps, int64_t reads) {
  return steps * (std::bit_width(static_cast<uint64_t>(steps)) + 4) + 2 * reads;
}

int64_t InsertionPricer::price_ops(int64_t touches, int64_t steps) {
  return 8 + touches * (2 * std::bit_width(static_cast<uint64_t>(steps)) + 4);
}

namespace {

// Fills the CSR `begin`/`at` from the per-value counts already in begin[v + 1].
void prefix_sums(std::vector<int32_t>& begin, std::vector<int32_t>& at) {
  for (size_t v = 1; v < begin.size(); ++v) begin[v] += begin[v - 1];
  at.resize(static_cast<size_t>(begin.back()));
}

}  // namespace

void InsertionPricer::index(std::span<const NodeId> sequence, std::span<const int64_t> timeline) {
  REMAT_CHECK(timeline.size() == sequence.size(),
              "greedy: the timeline is not the indexed sequence's (simulate with timeline)");
  const Graph& g = graph_;
  steps_ = static_cast<int32_t>(sequence.size());
  const auto values = static_cast<size_t>(g.num_values());
  made_begin_.assign(values + 1, 0);
  read_begin_.assign(values + 1, 0);
  for (NodeId n : sequence) {
    for (ValueId v : g.node(n).inputs)
      if (!g.is_graph_input(v)) ++read_begin_[static_cast<size_t>(v.value()) + 1];
    for (ValueId v : g.node(n).outputs) ++made_begin_[static_cast<size_t>(v.value()) + 1];
  }
  prefix_sums(made_begin_, made_at_);
  prefix_sums(read_begin_, read_at_);
  std::vector<int32_t> made_next(made_begin_.begin(), made_begin_.end() - 1);
  std::vector<int32_t> read_next(read_begin_.begin(), read_begin_.end() - 1);
  for (int32_t t = 0; t < steps_; ++t) {
    const Node& node = g.node(sequence[static_cast<size_t>(t)]);
    for (ValueId v : node.inputs)
      if (!g.is_graph_input(v)) read_at_[static_cast<size_t>(read_next[v.value()]++)] = t;
    for (ValueId v : node.outputs) made_at_[static_cast<size_t>(made_next[v.value()]++)] = t;
  }

  // The simulator's memory at a step is what is live across it plus the step's temporaries; what
  // is carried into the step is that less the temporaries and what the step makes.
  memory_.assign(timeline.begin(), timeline.end());
  crossing_.resize(static_cast<size_t>(steps_));
  for (int32_t t = 0; t < steps_; ++t) {
    const Node& node = g.node(sequence[static_cast<size_t>(t)]);
    int64_t made = 0;
    for (ValueId v : node.outputs) made += g.value(v).size_bytes;
    crossing_[static_cast<size_t>(t)] = memory_[static_cast<size_t>(t)] - node.temp_bytes - made;
  }
  suffix_max_.assign(static_cast<size_t>(steps_) + 1, std::numeric_limits<int64_t>::min());
  for (int32_t t = steps_ - 1; t >= 0; --t)
    suffix_max_[static_cast<size_t>(t)] =
        std::max(suffix_max_[static_cast<size_t>(t) + 1], memory_[static_cast<size_t>(t)]);
  const auto levels = static_cast<size_t>(std::bit_width(static_cast<uint32_t>(steps_)));
  max_table_.resize(std::max<size_t>(levels, 1));
  max_table_[0] = memory_;
  for (size_t k = 1; k < levels; ++k) {
    const std::vector<int64_t>& below = max_table_[k - 1];
    std::vector<int64_t>& row = max_table_[k];
    const size_t half = size_t{1} << (k - 1);
    row.resize(static_cast<size_t>(steps_) + 1 - (size_t{1} << k));
    for (size_t t = 0; t < row.size(); ++t) row[t] = std::max(below[t], below[t + half]);
  }
}

int64_t InsertionPricer::range_max(int32_t begin, int32_t end) const {
  const auto k = static_cast<size_t>(std::bit_width(static_cast<uint32_t>(end - begin + 1)) - 1);
  const std::vector<int64_t>& row = max_table_[k];
  return std::max(row[static_cast<size_t>(begin)],
                  row[static_cast<size_t>(end + 1 - (int32_t{1} << k))]);
}

int32_t InsertionPricer::first_read_of(NodeId step, int32_t from) const {
  int32_t first = -1;
  for (ValueId v : graph_.node(step).outputs) {
    const auto begin = read_at_.begin() + read_begin_[static_cast<size_t>(v.value())];
    const auto end = read_at_.begin() + read_begin_[static_cast<size_t>(v.value()) + 1];
    const auto it = std::lower_bound(begin, end, from);
    if (it != end && (first < 0 || *it < first)) first = *it;
  }
  return first;
}

InsertionPricer::Copy InsertionPricer::copy_at(ValueId v, int32_t at) const {
  const auto i = static_cast<size_t>(v.value());
  const auto made_begin = made_at_.begin() + made_begin_[i];
  const auto made_end = made_at_.begin() + made_begin_[i + 1];
  const auto next_made = std::lower_bound(made_begin, made_end, at);
  const int32_t next = next_made == made_end ? steps_ : *next_made;
  const auto read_begin = read_at_.begin() + read_begin_[i];
  const auto read_end = read_at_.begin() + read_begin_[i + 1];
  const auto next_read = std::lower_bound(read_begin, read_end, at);
  Copy copy;
  copy.lives_past = (next_read != read_end && *next_read < next) ||
                    (graph_.value(v).is_output && next_made == made_end);
  if (next_made != made_begin) {
    copy.produced = *(next_made - 1);
    copy.last_read = copy.produced;
    if (next_read != read_begin && *(next_read - 1) > copy.produced)
      copy.last_read = *(next_read - 1);
  }
  return copy;
}

bool InsertionPricer::touch_chain(std::span<const NodeId> chain) {
  auto touch = [&](ValueId v) -> Touched& {
    int32_t& slot = slot_[static_cast<size_t>(v.value())];
    if (slot < 0) {
      slot = static_cast<int32_t>(touched_.size());
      touched_.push_back({.value = v});
    }
    return touched_[static_cast<size_t>(slot)];
  };
  for (size_t i = 0; i < chain.size(); ++i) {
    const Node& node = graph_.node(chain[i]);
    if (!node.recomputable) return false;
    for (ValueId v : node.inputs) {
      if (graph_.is_graph_input(v)) continue;
      Touched& t = touch(v);
      (t.made >= 0 ? t.last_new_read : t.last_old_read) = static_cast<int32_t>(i);
    }
    for (ValueId v : node.outputs) touch(v).made = static_cast<int32_t>(i);
  }
  return true;
}

std::optional<int64_t> InsertionPricer::peak_with(std::span<const NodeId> chain, int32_t at) {
  const auto m = static_cast<int32_t>(chain.size());
  bool valid = touch_chain(chain);
  changes_.clear();
  chain_delta_.assign(static_cast<size_t>(m) + 1, 0);
  auto live_in_chain = [&](int32_t first, int32_t last, int64_t bytes) {
    if (first > last) return;
    chain_delta_[static_cast<size_t>(first)] += bytes;
    chain_delta_[static_cast<size_t>(last) + 1] -= bytes;
  };
  for (const Touched& t : touched_) {
    if (!valid) break;
    const int64_t bytes = graph_.value(t.value).size_bytes;
    const Copy copy = copy_at(t.value, at);
    if (copy.produced < 0) {
      valid = t.last_old_read < 0;  // else read where no copy holds it
    } else {
      // The earlier copy: read by the chain up to `last_old_read`, and after it unless the
      // chain's copy takes its later reads over.
      const int32_t old_until = copy.lives_past && t.made < 0 ? m - 1 : t.last_old_read;
      if (copy.lives_past) {
        if (old_until < 0) changes_.emplace_back(copy.last_read, -bytes);
        live_in_chain(old_until + 1, m - 1, -bytes);
      } else if (old_until >= 0) {
        changes_.emplace_back(copy.last_read, bytes);
        live_in_chain(0, old_until, bytes);
      }
    }
    if (t.made >= 0)
      live_in_chain(t.made, copy.lives_past ? m - 1 : std::max(t.made, t.last_new_read), bytes);
  }
  for (const Touched& t : touched_) slot_[static_cast<size_t>(t.value.value())] = -1;
  touched_.clear();
  if (!valid) return std::nullopt;

  int64_t peak = suffix_max_[static_cast<size_t>(at)];
  int64_t change = 0;
  for (int32_t i = 0; i < m; ++i) {
    change += chain_delta_[static_cast<size_t>(i)];
    peak = std::max(peak, crossing_[static_cast<size_t>(at)] + change +
                              graph_.node(chain[static_cast<size_t>(i)]).temp_bytes);
  }
  // Before `at`, each change holds on (after, at): the memory there is shifted piecewise.
  std::sort(changes_.begin(), changes_.end());
  int32_t begin = 0;
  change = 0;
  for (const auto& [after, bytes] : changes_) {
    if (after >= at - 1) break;
    if (begin <= after) peak = std::max(peak, range_max(begin, after) + change);
    begin = after + 1;
    change += bytes;
  }
  if (begin <= at - 1) peak = std::max(peak, range_max(begin, at - 1) + change);
  return peak;
}

}  // namespace remat::greedy
