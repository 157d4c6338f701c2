// A chain stage run another way, measured by extract_chain()'s sizing rules (lower.h).
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "remat/error.h"
#include "remat/lower.h"

namespace remat {
namespace {

// Made by a forward node that is not a backward helper (chain_extract.cc's forward_value).
bool forward_value(const Graph& g, const GraphChain& gc, ValueId v) {
  if (g.is_graph_input(v)) return false;
  const NodeId p = g.producer(v);
  return g.node(p).phase == Phase::kForward && !gc.backward_helper[p];
}

// Values the chain accounts for (chain_extract.cc, size_stages): sized, produced, and neither a
// forward graph output or shared value (resident) nor the output of a non-recomputable forward
// node (kept once).
bool counted(const Graph& g, const GraphChain& gc, ValueId v) {
  if (g.is_graph_input(v) || g.value(v).size_bytes == 0) return false;
  if (!forward_value(g, gc, v)) return true;
  return !g.value(v).is_output && !gc.shared[v] && g.node(g.producer(v)).recomputable;
}

// Peak of live counted bytes + temp while `nodes` run, each production living until the last read
// before the next production of the same value; `initial` values are live at the start; the last
// production (or the initial one) of a value `keep` accepts lives to the end.
template <class Keep>
int64_t run_peak(const Graph& g, const GraphChain& gc, std::span<const NodeId> nodes,
                 std::span<const ValueId> initial, const Keep& keep) {
  const auto steps = static_cast<int32_t>(nodes.size());
  struct Interval {
    int64_t bytes;
    int32_t start, end;  // live on steps [start, end]; start -1: before the first step
  };
  std::vector<Interval> intervals;
  std::unordered_map<int32_t, size_t> open;  // value -> its current interval
  for (ValueId v : initial) {
    if (!counted(g, gc, v) || open.count(v.value())) continue;
    open[v.value()] = intervals.size();
    intervals.push_back({g.value(v).size_bytes, -1, 0});
  }
  for (int32_t t = 0; t < steps; ++t) {
    const Node& n = g.node(nodes[static_cast<size_t>(t)]);
    for (ValueId v : n.inputs)
      if (auto it = open.find(v.value()); it != open.end()) intervals[it->second].end = t;
    for (ValueId y : n.outputs) {
      if (!counted(g, gc, y)) continue;
      open[y.value()] = intervals.size();
      intervals.push_back({g.value(y).size_bytes, t, t});
    }
  }
  for (const auto& [v, i] : open)
    if (keep(ValueId{v})) intervals[i].end = std::max(steps - 1, 0);
  // Index t + 1; a kept value ends at max(steps - 1, 0), so with no steps its end + 2 is 2.
  std::vector<int64_t> diff(static_cast<size_t>(steps) + 3, 0);
  int64_t before = 0;
  for (const Interval& in : intervals) {
    if (in.start < 0) before += in.bytes;
    diff[static_cast<size_t>(in.start + 1)] += in.bytes;
    diff[static_cast<size_t>(in.end + 2)] -= in.bytes;
  }
  int64_t live = diff[0], peak = before;
  for (int32_t t = 0; t < steps; ++t) {
    live += diff[static_cast<size_t>(t + 1)];
    peak = std::max(peak, live + g.node(nodes[static_cast<size_t>(t)]).temp_bytes);
  }
  return peak;
}

}  // namespace

StageRunFigures measure_stage_runs(const Graph& g, const GraphChain& gc, int32_t l,
                                   std::span<const NodeId> forward,
                                   std::span<const NodeId> backward) {
  const auto stages = static_cast<int32_t>(gc.stages.size());
  if (l < 1 || l > stages)
    throw InputError(fmt::format("chain: stage {} out of range 1..{}", l, stages));
  const auto values = static_cast<size_t>(g.num_values());
  auto stage_of_value = [&](ValueId v) { return gc.stage_of[g.producer(v)]; };
  // a^ℓ membership (output_stage in chain_extract.cc).
  IdVector<ValueId, int32_t> output_stage(values, 0);
  for (int32_t s = 1; s <= stages; ++s)
    for (ValueId v : gc.stages[static_cast<size_t>(s) - 1].output) output_stage[v] = s;
  auto in_output = [&](ValueId v, int32_t s) { return output_stage[v] == s; };
  // extra = Σ_{s≤ℓ} kept-once forward outputs + Σ_{s>ℓ} backward graph outputs; δ crossing into ℓ.
  int64_t extra = 0;
  std::vector<ValueId> delta_in;
  IdVector<ValueId, int32_t> lowest_user(values, 0);
  for (int32_t i = 0; i < g.num_values(); ++i) {
    const ValueId v{i};
    if (g.is_graph_input(v) || g.value(v).size_bytes == 0) continue;
    const int32_t s = stage_of_value(v);
    if (forward_value(g, gc, v)) {
      if (!g.value(v).is_output && !gc.shared[v] && !g.node(g.producer(v)).recomputable && s <= l)
        extra += g.value(v).size_bytes;
      continue;
    }
    if (g.value(v).is_output) {
      if (s > l) extra += g.value(v).size_bytes;
      continue;
    }
    int32_t lowest = s;
    for (NodeId u : g.users(v)) lowest = std::min(lowest, gc.stage_of[u]);
    lowest_user[v] = lowest;
    if (lowest <= l && l < s) delta_in.push_back(v);
  }
  auto bytes_of = [&](std::span<const ValueId> vs) {
    int64_t sum = 0;
    for (ValueId v : vs)
      if (counted(g, gc, v)) sum += g.value(v).size_bytes;
    return sum;
  };
  const std::span<const ValueId> input =
      l > 1 ? std::span<const ValueId>(gc.stages[static_cast<size_t>(l) - 2].output)
            : std::span<const ValueId>{};
  const StageNodes& nodes = gc.stages[static_cast<size_t>(l) - 1];
  const int64_t a_in = bytes_of(input), a = bytes_of(nodes.output);

  StageRunFigures f;
  for (NodeId n : forward)
    if (g.node(n).recomputable) f.u_f += g.node(n).cost;
  for (NodeId n : backward) f.u_b += g.node(n).cost;
  // Kept from F to B: the stage's forward values `backward` reads before producing them again.
  IdVector<ValueId, uint8_t> kept(values, 0), made(values, 0);
  std::vector<ValueId> saved;
  for (NodeId n : forward)
    for (ValueId y : g.node(n).outputs) made[y] = 1;
  IdVector<ValueId, uint8_t> remade(values, 0);
  for (NodeId n : backward) {
    for (ValueId v : g.node(n).inputs) {
      if (made[v] && !remade[v] && !kept[v] && counted(g, gc, v) && forward_value(g, gc, v) &&
          !in_output(v, l)) {
        kept[v] = 1;
        saved.push_back(v);
      }
    }
    for (ValueId y : g.node(n).outputs) remade[y] = 1;
  }
  f.abar = a + bytes_of(saved);
  auto is_input = [&](ValueId v) { return l > 1 && in_output(v, l - 1); };
  const int64_t peak_f = run_peak(g, gc, forward, input, [&](ValueId v) {
    return is_input(v) || in_output(v, l) || kept[v] != 0;
  });
  f.o_f = std::max<int64_t>(peak_f - f.abar - a_in, 0) + extra;

  std::vector<ValueId> initial(input.begin(), input.end());
  initial.insert(initial.end(), nodes.output.begin(), nodes.output.end());
  initial.insert(initial.end(), saved.begin(), saved.end());
  initial.insert(initial.end(), delta_in.begin(), delta_in.end());
  const int64_t peak_b = run_peak(g, gc, backward, initial, [&](ValueId v) {
    if (is_input(v)) return true;
    if (!forward_value(g, gc, v)) return g.value(v).is_output || lowest_user[v] < l;
    return false;
  });
  const int64_t delta_here = gc.chain.stages[static_cast<size_t>(l) - 1].sizes.delta;
  const int64_t delta_below = l > 1 ? gc.chain.stages[static_cast<size_t>(l) - 2].sizes.delta : 0;
  f.o_b = std::max<int64_t>(peak_b - f.abar - a_in - delta_here - delta_below, 0) + extra;
  return f;
}

}  // namespace remat
