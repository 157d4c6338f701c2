// Plan JSON v1 (docs/formats.md).
#include <fmt/format.h>

#include "json_util.h"
#include "remat/io.h"

namespace remat {
namespace {

using io::json;

json stats_json(const SolveStats& stats) {
  json counters = json::object();
  for (const auto& [key, value] : stats.counters) counters[key] = value;
  json series = json::object();
  for (const auto& [key, values] : stats.series) series[key] = values;
  json lists = json::object();
  for (const auto& [key, names] : stats.lists) lists[key] = names;
  json out = {{"stop_reason", to_string(stats.stop_reason)},
              {"wall_time_s", stats.wall_time_s},
              {"work", stats.work},
              {"iterations", stats.iterations},
              {"counters", std::move(counters)}};
  if (stats.cost_lower_bound) out["cost_lower_bound"] = *stats.cost_lower_bound;
  if (stats.min_feasible_budget) out["min_feasible_budget_bytes"] = *stats.min_feasible_budget;
  if (!series.empty()) out["series"] = std::move(series);
  if (!lists.empty()) out["lists"] = std::move(lists);
  return out;
}

// Plans written before fingerprints existed have none; their step names are still checked.
void check_fingerprint(const Graph& graph, const json& doc, std::string_view source) {
  if (!doc.contains("graph_fingerprint")) return;
  const std::string recorded =
      io::get_string_or(doc, "graph_fingerprint", "", source, "the document");
  const std::string actual = graph_fingerprint(graph);
  if (recorded == actual) return;
  const std::string planned_for = io::get_string_or(doc, "graph", "", source, "the document");
  const auto label = [](const std::string& name) {
    return name.empty() ? std::string() : fmt::format(" '{}'", shorten(name, 80));
  };
  throw InputError(fmt::format(
      "{}: the plan was made for another graph{} (fingerprint {}); this graph{} has fingerprint "
      "{}: plan it again for this graph",
      source, label(planned_for), shorten(recorded, 40), label(graph.name()), actual));
}

}  // namespace

std::string plan_to_json(const Graph& graph, const SolveResult& result, Budget budget) {
  const Baseline base = baseline(graph);
  json sequence = json::array();
  for (NodeId n : result.plan.sequence)
    sequence.push_back({{"id", n.value()}, {"name", graph.node(n).name}});
  const double ci = base.cost > 0 ? 100.0 * (result.eval.cost - base.cost) / base.cost : 0.0;
  const json doc = {
      {"format", "remat-plan"},
      {"version", 1},
      {"graph", graph.name()},
      {"graph_fingerprint", graph_fingerprint(graph)},
      {"solver", result.plan.solver},
      {"budget_bytes", budget.bytes},
      {"status", to_string(result.plan.stats.status)},
      {"peak_bytes", result.eval.peak_bytes},
      {"cost", result.eval.cost},
      {"baseline_peak_bytes", base.peak_bytes},
      {"baseline_cost", base.cost},
      {"peak_percent_of_baseline", base.peak_bytes > 0
                                       ? 100.0 * static_cast<double>(result.eval.peak_bytes) /
                                             static_cast<double>(base.peak_bytes)
                                       : 0.0},
      {"cost_increase_percent", ci},
      {"steps", result.plan.sequence.size()},
      {"stats", stats_json(result.plan.stats)},
      {"sequence", std::move(sequence)},
  };
  return doc.dump(1) + "\n";
}

void write_plan_file(const std::string& path, const Graph& graph, const SolveResult& result,
                     Budget budget) {
  write_text_file_atomic(path, plan_to_json(graph, result, budget));
}

Plan parse_plan_json(const Graph& graph, std::string_view json_text, std::string_view source) {
  const json doc = io::parse_json(json_text, source);
  io::check_format(doc, "remat-plan", 1, source);
  check_fingerprint(graph, doc, source);
  Plan plan;
  plan.solver = io::get_string_or(doc, "solver", "", source, "the document");
  const std::string status = io::get_string_or(doc, "status", "feasible", source, "the document");
  const std::optional<SolveStatus> parsed = parse_solve_status(status);
  if (!parsed) io::field_error(source, "the document", "status", fmt::format("is '{}'", status));
  plan.stats.status = *parsed;
  const json& steps = io::require_array(doc, "sequence", source, "the document");
  for (size_t t = 0; t < steps.size(); ++t) {
    const std::string where = fmt::format("step {}", t);
    const json& step = steps[t];
    int64_t id = 0;
    if (step.is_number_integer()) {
      id = io::saturated_int(step);
    } else {
      id = io::get_int(step, "id", source, where);
    }
    if (id < 0 || id >= graph.num_nodes())
      throw InputError(fmt::format(
          "{}: {}: node id {} does not exist in the graph ({} nodes)", source, where,
          step.is_number_integer() ? step.dump() : fmt::to_string(id), graph.num_nodes()));
    const NodeId n{static_cast<int32_t>(id)};
    if (step.is_object() && step.contains("name")) {
      const std::string name = io::get_string_or(step, "name", "", source, where);
      if (name != graph.node(n).name)
        throw InputError(
            fmt::format("{}: {}: node {} is '{}' in the graph but '{}' in the plan "
                        "(was the plan made for another graph?)",
                        source, where, id, graph.node(n).name, name));
    }
    plan.sequence.push_back(n);
  }
  return plan;
}

Plan read_plan_file(const Graph& graph, const std::string& path) {
  return parse_plan_json(graph, read_text_file(path), path);
}

}  // namespace remat
