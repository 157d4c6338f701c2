#include "moccasin/incumbent.h"

#include <fmt/format.h>

#include <algorithm>

namespace remat::moccasin {
namespace {

// Start events of each node's computations, in sequence order; false with `why` when the staged
// events cannot hold the sequence.
bool assign_events(const Instance& inst, std::span<const int32_t> sequence,
                   std::vector<std::vector<int32_t>>& starts, std::string& why) {
  const auto n = static_cast<int32_t>(inst.nodes.size());
  starts.assign(static_cast<size_t>(n), {});
  int32_t next_first = 0;  // the next node whose first computation is due
  int32_t last_slot = -1;  // the last recomputed position in the current stage
  for (size_t t = 0; t < sequence.size(); ++t) {
    const int32_t p = sequence[t];
    std::vector<int32_t>& mine = starts[static_cast<size_t>(p)];
    if (!inst.staged) {
      mine.push_back(static_cast<int32_t>(t) + 1);
      continue;
    }
    if (mine.empty()) {
      if (p != next_first) {
        why = fmt::format("step {}: node {} is computed before node {} (not in the node order)", t,
                          p, next_first);
        return false;
      }
      mine.push_back(first_event(p));
      ++next_first;
      last_slot = -1;
      continue;
    }
    if (next_first >= n) {
      why = fmt::format("step {}: node {} is recomputed after the last node (no stage left)", t, p);
      return false;
    }
    if (p <= last_slot) {
      why = fmt::format("step {}: stage {} recomputes node {} after node {} (not in node order)", t,
                        next_first + 1, p, last_slot);
      return false;
    }
    mine.push_back(staged_event(next_first + 1, p));
    last_slot = p;
  }
  for (int32_t p = 0; p < n; ++p) {
    const auto runs = static_cast<int32_t>(starts[static_cast<size_t>(p)].size());
    if (runs == 0) {
      why = fmt::format("node {} is never computed", p);
      return false;
    }
    if (runs > inst.nodes[static_cast<size_t>(p)].copies) {
      why = fmt::format("node {} runs {} times, more than its {} copies", p, runs,
                        inst.nodes[static_cast<size_t>(p)].copies);
      return false;
    }
  }
  return true;
}

// The copy of `producer` that a read at `event` uses: the latest one started before it.
size_t serving_copy(const std::vector<int32_t>& producer_starts, int32_t event) {
  size_t j = 0;
  while (j + 1 < producer_starts.size() && producer_starts[j + 1] < event) ++j;
  return j;
}

}  // namespace

std::vector<int32_t> staged_form(int32_t num_nodes, std::span<const int32_t> sequence) {
  std::vector<int32_t> out, gap;
  int32_t next_first = 0;
  auto flush = [&] {
    std::sort(gap.begin(), gap.end());
    gap.erase(std::unique(gap.begin(), gap.end()), gap.end());
    out.insert(out.end(), gap.begin(), gap.end());
    gap.clear();
  };
  for (int32_t p : sequence) {
    if (p == next_first) {
      flush();
      out.push_back(p);
      ++next_first;
    } else if (p < next_first) {
      gap.push_back(p);
    } else {
      return {sequence.begin(), sequence.end()};  // a first computation out of the node order
    }
  }
  if (next_first != num_nodes) return {sequence.begin(), sequence.end()};
  out.insert(out.end(), gap.begin(), gap.end());  // after the last node: left as is (refused)
  return out;
}

std::vector<int32_t> computations(int32_t num_nodes, std::span<const int32_t> sequence) {
  std::vector<int32_t> runs(static_cast<size_t>(num_nodes), 0);
  for (int32_t p : sequence) ++runs[static_cast<size_t>(p)];
  return runs;
}

std::optional<Solution> to_solution(const Instance& inst, std::span<const int32_t> sequence,
                                    std::string& why) {
  std::vector<std::vector<int32_t>> starts;
  if (!assign_events(inst, sequence, starts, why)) return std::nullopt;
  const auto n = static_cast<int32_t>(inst.nodes.size());
  const int32_t end_max = horizon(inst) + 1;

  // Ends: one past the last read of each copy's output (the simulator's liveness), at least
  // start + 1; a graph output's last copy holds it to the end.
  std::vector<std::vector<std::vector<int32_t>>> ends(static_cast<size_t>(n));
  for (int32_t p = 0; p < n; ++p) {
    const NodeModel& node = inst.nodes[static_cast<size_t>(p)];
    const std::vector<int32_t>& mine = starts[static_cast<size_t>(p)];
    auto& node_ends = ends[static_cast<size_t>(p)];
    for (size_t i = 0; i < mine.size(); ++i) {
      node_ends.emplace_back();
      for (const Output& output : node.outputs)
        node_ends[i].push_back(output.live_to_end && i + 1 == mine.size() ? end_max : mine[i] + 1);
    }
  }
  for (int32_t v = 0; v < n; ++v)
    for (const Use& use : inst.nodes[static_cast<size_t>(v)].uses)
      for (int32_t event : starts[static_cast<size_t>(v)]) {
        const auto& producer = starts[static_cast<size_t>(use.producer)];
        const size_t j = serving_copy(producer, event);
        if (producer[j] >= event) {
          why = fmt::format("node {} reads node {} before it is computed", v, use.producer);
          return std::nullopt;
        }
        int32_t& end = ends[static_cast<size_t>(use.producer)][j][static_cast<size_t>(use.output)];
        end = std::max(end, event + 1);
      }

  Solution solution;
  std::vector<int64_t> profile(static_cast<size_t>(end_max) + 2, 0);
  for (int32_t p = 0; p < n; ++p) {
    const NodeModel& node = inst.nodes[static_cast<size_t>(p)];
    const std::vector<int32_t>& mine = starts[static_cast<size_t>(p)];
    std::vector<CopyValue> copies;
    for (int32_t i = 0; i < node.copies; ++i) {
      const bool active = i < static_cast<int32_t>(mine.size());
      const int32_t start = active ? mine[static_cast<size_t>(i)] : absent_start(inst, p);
      copies.push_back({active, start});
      if (i > 0) solution.hint_active.push_back(active ? 1 : 0);
      if (!inst.staged || i > 0) solution.hint_starts.push_back(start);
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        const int32_t end =
            active ? ends[static_cast<size_t>(p)][static_cast<size_t>(i)][k] : start + 1;
        solution.hint_ends.push_back(end);
        if (active && node.outputs[k].size > 0) {
          profile[static_cast<size_t>(start)] += node.outputs[k].size;
          profile[static_cast<size_t>(end)] -= node.outputs[k].size;
        }
      }
      if (active && node.temp > 0) {
        profile[static_cast<size_t>(start)] += node.temp;
        profile[static_cast<size_t>(start) + 1] -= node.temp;
      }
    }
    solution.copies.push_back(std::move(copies));
  }
  int64_t level = 0, peak = 0;
  for (int64_t change : profile) peak = std::max(peak, level += change);
  solution.peak = peak;
  return solution;
}

int64_t model_cost(const Instance& instance, const Solution& solution) {
  int64_t cost = 0;
  for (size_t p = 0; p < solution.copies.size(); ++p)
    for (const CopyValue& copy : solution.copies[p])
      if (copy.active) cost += instance.nodes[p].weight;
  return cost;
}

}  // namespace remat::moccasin
