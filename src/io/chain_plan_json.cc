// Chain plan JSON, format "remat-chain-plan" v1 (docs/solvers/rotor.md).
#include <fmt/format.h>

#include "json_util.h"
#include "remat/error.h"
#include "remat/io.h"

namespace remat {

using io::json;

std::string chain_plan_to_json(const Chain& chain, const ChainSolveResult& result, Budget budget) {
  const ChainEvaluation store_all = simulate_chain(chain, store_all_sequence(chain));
  json ops = json::array();
  for (const ChainOp& op : result.plan.sequence)
    ops.push_back({{"op", op_name(op.kind)}, {"stage", op.stage}});
  const SolveStats& stats = result.plan.stats;
  json counters = json::object();
  for (const auto& [name, value] : stats.counters) counters[name] = value;
  json doc = {
      {"format", "remat-chain-plan"},
      {"version", 1},
      {"chain", chain.name},
      {"length", chain.length()},
      {"solver", result.plan.solver},
      {"budget_bytes", budget.bytes},
      {"status", to_string(stats.status)},
      {"feasible", result.eval.peak_bytes <= budget.bytes},
      {"makespan", result.eval.cost},
      {"peak_bytes", result.eval.peak_bytes},
      {"store_all_makespan", store_all.cost},
      {"store_all_peak_bytes", store_all.peak_bytes},
      {"solve_time_s", stats.wall_time_s},
      {"work", stats.work},
      {"stop_reason", to_string(stats.stop_reason)},
      {"counters", std::move(counters)},
      {"sequence", format_sequence(result.plan.sequence)},
      {"ops", std::move(ops)},
  };
  if (stats.min_feasible_budget) doc["min_feasible_budget_bytes"] = *stats.min_feasible_budget;
  return doc.dump(1) + "\n";
}

ChainSequence parse_chain_plan_json(std::string_view json_text, std::string_view source) {
  const json doc = io::parse_json(json_text, source);
  io::check_format(doc, "remat-chain-plan", 1, source);
  const json& items = io::require_array(doc, "ops", source, "the document");
  ChainSequence ops;
  ops.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string where = fmt::format("op {}", i);
    const json& item = io::require_object(items[i], source, where);
    const json& name = io::require_field(item, "op", source, where);
    if (!name.is_string()) io::field_error(source, where, "op", "must be a string");
    const std::optional<ChainOpKind> kind = parse_op_name(name.get<std::string>());
    if (!kind)
      io::field_error(
          source, where, "op",
          fmt::format("names an unknown op {} (known: F_ck, F_none, F_all, B)", io::brief(name)));
    const int64_t stage = io::get_int(item, "stage", source, where);
    if (stage < 1 || stage > INT32_MAX)
      io::field_error(source, where, "stage", fmt::format("must be >= 1 (got {})", stage));
    ops.push_back({*kind, static_cast<int32_t>(stage)});
  }
  return ops;
}

}  // namespace remat
