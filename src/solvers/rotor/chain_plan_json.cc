// Chain plan JSON, format "remat-chain-plan" v1 (docs/solvers/rotor.md).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "chain_solver.h"
#include "remat/error.h"

namespace remat::rotor {

using nlohmann::json;

std::string chain_plan_to_json(const Chain& chain, const ChainSolveResult& result, Budget budget) {
  const ChainEvaluation store_all = simulate_chain(chain, store_all_sequence(chain));
  json ops = json::array();
  for (const ChainOp& op : result.plan.ops)
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
      {"makespan", result.eval.makespan},
      {"peak_bytes", result.eval.peak_bytes},
      {"store_all_makespan", store_all.makespan},
      {"store_all_peak_bytes", store_all.peak_bytes},
      {"solve_time_s", stats.wall_time_s},
      {"counters", std::move(counters)},
      {"sequence", format_sequence(result.plan.ops)},
      {"ops", std::move(ops)},
  };
  if (stats.min_feasible_budget) doc["min_feasible_budget_bytes"] = *stats.min_feasible_budget;
  return doc.dump(1) + "\n";
}

ChainSequence parse_chain_plan_json(std::string_view json_text, std::string_view source) {
  // Nesting is capped while parsing (a plan is 3 levels deep), so a hostile file cannot exhaust
  // the stack in the parser, in messages or in the destructor.
  constexpr int kMaxDepth = 64;
  const auto cap_depth = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxDepth)
      throw InputError(fmt::format("{}: JSON nested deeper than {} levels", source, kMaxDepth));
    return true;
  };
  json doc;
  try {
    doc = json::parse(json_text, cap_depth);
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: invalid JSON: {}", source, shorten(e.what(), 200)));
  }
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != "remat-chain-plan")
    throw InputError(
        fmt::format("{}: not a chain plan (expected \"format\": \"remat-chain-plan\")", source));
  if (!doc.contains("version") || doc["version"] != 1)
    throw InputError(fmt::format(
        "{}: unsupported chain plan version {} (this remat reads 1)", source,
        doc.contains("version") ? shorten(doc["version"].dump(), 40) : std::string("(missing)")));
  if (!doc.contains("ops") || !doc["ops"].is_array())
    throw InputError(fmt::format("{}: field 'ops' is missing or not an array", source));
  ChainSequence ops;
  for (size_t i = 0; i < doc["ops"].size(); ++i) {
    const json& item = doc["ops"][i];
    const json* name = item.is_object() && item.contains("op") ? &item["op"] : nullptr;
    const json* stage = item.is_object() && item.contains("stage") ? &item["stage"] : nullptr;
    if (name == nullptr || !name->is_string() || stage == nullptr || !stage->is_number_integer())
      throw InputError(
          fmt::format("{}: op {}: expected {{\"op\": NAME, \"stage\": INTEGER}}", source, i));
    const std::optional<OpKind> kind = parse_op_name(name->get<std::string>());
    if (!kind)
      throw InputError(fmt::format("{}: op {}: unknown op '{}' (known: F_ck, F_none, F_all, B)",
                                   source, i, name->get<std::string>()));
    const int64_t stage_number = stage->is_number_unsigned() && stage->get<uint64_t>() > INT32_MAX
                                     ? int64_t{INT32_MAX} + 1
                                     : stage->get<int64_t>();
    if (stage_number < 1 || stage_number > INT32_MAX)
      throw InputError(fmt::format("{}: op {}: stage {} is out of range", source, i,
                                   shorten(stage->dump(), 40)));
    ops.push_back({*kind, static_cast<int32_t>(stage_number)});
  }
  return ops;
}

}  // namespace remat::rotor
