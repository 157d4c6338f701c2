#include "remat/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace remat {
namespace {

// Per-value state while replaying a sequence. Flat arrays: simulate() is called in loops.
struct ReplayState {
  IdVector<ValueId, int32_t> produced_at;  // step of the current production, -1 if none yet
  IdVector<ValueId, int32_t> last_use;     // last step reading the current production
  IdVector<NodeId, int32_t> runs;          // executions per node
  std::vector<int64_t> delta;              // difference array of live bytes over steps
};

std::string step_error(const Graph& g, int32_t t, NodeId n, std::string_view what) {
  return fmt::format("step {}: {} {}", t, g.describe(n), what);
}

// Adds the live interval [begin, end] of `bytes` to the difference array.
void add_interval(std::vector<int64_t>& delta, int32_t begin, int32_t end, int64_t bytes) {
  delta[static_cast<size_t>(begin)] += bytes;
  delta[static_cast<size_t>(end) + 1] -= bytes;
}

}  // namespace

Evaluation simulate(const Graph& g, std::span<const NodeId> sequence, SimulateOptions options) {
  Evaluation e;
  const auto steps = static_cast<int32_t>(sequence.size());
  if (steps == 0) {
    e.error = "the sequence is empty";
    return e;
  }
  ReplayState s;
  s.produced_at.assign(static_cast<size_t>(g.num_values()), -1);
  s.last_use.assign(static_cast<size_t>(g.num_values()), -1);
  s.runs.assign(static_cast<size_t>(g.num_nodes()), 0);
  s.delta.assign(static_cast<size_t>(steps) + 1, 0);

  for (int32_t t = 0; t < steps; ++t) {
    const NodeId n = sequence[static_cast<size_t>(t)];
    if (n.value() < 0 || n.value() >= g.num_nodes()) {
      e.error = fmt::format("step {}: node id {} does not exist", t, n.value());
      e.error_step = t;
      return e;
    }
    const Node& node = g.node(n);
    if (!node.recomputable && s.runs[n] > 0) {
      e.error = step_error(g, t, n, "is not recomputable and already ran");
      e.error_step = t;
      return e;
    }
    ++s.runs[n];
    for (ValueId v : node.inputs) {
      if (g.is_graph_input(v)) continue;
      if (s.produced_at[v] < 0) {
        e.error = step_error(g, t, n, fmt::format("reads {} before it is produced", g.describe(v)));
        e.error_step = t;
        return e;
      }
      s.last_use[v] = t;
    }
    for (ValueId v : node.outputs) {
      const int64_t bytes = g.value(v).size_bytes;
      if (s.produced_at[v] >= 0)
        add_interval(s.delta, s.produced_at[v], std::max(s.last_use[v], s.produced_at[v]), bytes);
      s.produced_at[v] = t;
      s.last_use[v] = t;
    }
    e.cost += node.cost;
  }

  int64_t resident = 0;  // graph inputs, live throughout
  for (ValueId v : g.graph_inputs()) resident += g.value(v).size_bytes;
  for (int32_t i = 0; i < g.num_values(); ++i) {
    const ValueId v{i};
    if (s.produced_at[v] < 0) {
      if (g.value(v).is_output && !g.is_graph_input(v)) {
        e.error = fmt::format("graph output {} is never produced", g.describe(v));
        return e;
      }
      continue;
    }
    const int32_t end = g.value(v).is_output ? steps - 1 : s.last_use[v];
    add_interval(s.delta, s.produced_at[v], end, g.value(v).size_bytes);
  }
  for (int32_t n = 0; n < g.num_nodes(); ++n)
    if (!g.node(NodeId{n}).recomputable && s.runs[NodeId{n}] == 0) {
      e.error = fmt::format("{} is not recomputable and must run exactly once, but never runs",
                            g.describe(NodeId{n}));
      return e;
    }

  if (options.timeline) e.timeline.resize(static_cast<size_t>(steps));
  int64_t live = resident;
  e.peak_bytes = -1;
  for (int32_t t = 0; t < steps; ++t) {
    live += s.delta[static_cast<size_t>(t)];
    const int64_t mem = live + g.node(sequence[static_cast<size_t>(t)]).temp_bytes;
    if (options.timeline) e.timeline[static_cast<size_t>(t)] = mem;
    if (mem > e.peak_bytes) {
      e.peak_bytes = mem;
      e.peak_step = t;
    }
  }
  e.valid = true;
  return e;
}

Sequence default_schedule(const Graph& g) {
  Sequence seq;
  seq.reserve(static_cast<size_t>(g.num_nodes()));
  for (int32_t n = 0; n < g.num_nodes(); ++n) seq.push_back(NodeId{n});
  return seq;
}

std::optional<Sequence> first_run_reordering(const Graph& g, std::span<const NodeId> sequence) {
  std::vector<char> seen(static_cast<size_t>(g.num_nodes()), 0);
  Sequence order;
  for (NodeId n : sequence)
    if (!std::exchange(seen[static_cast<size_t>(n.value())], 1)) order.push_back(n);
  if (order.size() != seen.size()) return std::nullopt;
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i].value() != static_cast<int32_t>(i)) return order;
  return std::nullopt;
}

std::vector<bool> required_nodes(const Graph& g) {
  std::vector<bool> required(static_cast<size_t>(g.num_nodes()), false);
  for (ValueId v : g.graph_outputs())
    if (!g.is_graph_input(v)) required[static_cast<size_t>(g.producer(v).value())] = true;
  for (int32_t n = 0; n < g.num_nodes(); ++n)
    if (!g.node(NodeId{n}).recomputable) required[static_cast<size_t>(n)] = true;
  // Reverse topological sweep: producers of a required node's inputs are required.
  for (int32_t n = g.num_nodes() - 1; n >= 0; --n) {
    if (!required[static_cast<size_t>(n)]) continue;
    for (ValueId v : g.node(NodeId{n}).inputs)
      if (!g.is_graph_input(v)) required[static_cast<size_t>(g.producer(v).value())] = true;
  }
  return required;
}

namespace {

int64_t compute_memory_lower_bound(const Graph& g, const std::vector<bool>& required) {
  int64_t resident = 0;
  IdVector<ValueId, char> is_resident(static_cast<size_t>(g.num_values()), 0);
  for (ValueId v : g.graph_inputs()) {
    resident += g.value(v).size_bytes;
    is_resident[v] = 1;
  }
  int64_t final_footprint = resident;
  for (ValueId v : g.graph_outputs())
    if (!is_resident[v]) final_footprint += g.value(v).size_bytes;
  int64_t bound = final_footprint;
  for (int32_t n = 0; n < g.num_nodes(); ++n) {
    if (!required[static_cast<size_t>(n)]) continue;
    const Node& node = g.node(NodeId{n});
    int64_t footprint = resident + node.temp_bytes;
    for (ValueId v : node.inputs)
      if (!is_resident[v]) footprint += g.value(v).size_bytes;
    for (ValueId v : node.outputs) footprint += g.value(v).size_bytes;
    bound = std::max(bound, footprint);
  }
  return bound;
}

double compute_cost_lower_bound(const Graph& g, const std::vector<bool>& required) {
  double cost = 0;
  for (int32_t n = 0; n < g.num_nodes(); ++n)
    if (required[static_cast<size_t>(n)]) cost += g.node(NodeId{n}).cost;
  return cost;
}

}  // namespace

GraphBounds compute_bounds(const Graph& g) {
  const std::vector<bool> required = required_nodes(g);
  const auto start = std::chrono::steady_clock::now();
  const Evaluation e = simulate(g, default_schedule(g));
  return {.memory_lower_bound = compute_memory_lower_bound(g, required),
          .cost_lower_bound = compute_cost_lower_bound(g, required),
          .baseline_peak_bytes = e.peak_bytes,
          .baseline_cost = e.cost,
          .simulation_seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

int64_t memory_lower_bound(const Graph& g) { return g.bounds().memory_lower_bound; }

double cost_lower_bound(const Graph& g) { return g.bounds().cost_lower_bound; }

Baseline baseline(const Graph& g) {
  return {g.bounds().baseline_peak_bytes, g.bounds().baseline_cost};
}

}  // namespace remat
