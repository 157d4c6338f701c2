#include "chain_commands.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "remat/error.h"
#include "remat/io.h"
#include "rotor/chain_solver.h"
#include "rotor/dp.h"
#include "rotor/generate_chain.h"

namespace remat::cli {
namespace {

using rotor::ChainEvaluation;
using rotor::ChainSolveResult;

Chain read_valid_chain(const std::string& path) {
  Chain chain = read_chain_file(path);
  rotor::validate_chain(chain, path);
  return chain;
}

ChainEvaluation store_all(const Chain& chain) {
  return rotor::simulate_chain(chain, rotor::store_all_sequence(chain));
}

std::string mib(int64_t bytes) {
  return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1 << 20));
}

rotor::ChainSolveOptions chain_options(const SolverArgs& args, Budget budget,
                                       std::string_view solver) {
  rotor::ChainSolveOptions options;
  options.budget = budget;
  options.time_limit_s = args.time_limit_s;
  options.params = parse_params(args.params, solver);
  return options;
}

// Throws when the solver showed the budget is below what it can meet, naming that budget.
void reject_infeasible(const std::string& path, const ChainSolveResult& r, Budget budget) {
  const auto& least = r.plan.stats.min_feasible_budget;
  if (!least || budget.bytes >= *least) return;
  throw InputError(
      fmt::format("budget {} bytes ({}) is below the smallest budget {} can meet on "
                  "{}: {} bytes ({})",
                  budget.bytes, mib(budget.bytes), r.plan.solver, path, *least, mib(*least)));
}

// "none", the graph baseline, is store-all on a chain. "auto" (the default) is rotor: its DP is
// optimal on a chain, so a portfolio has nothing to add.
std::string chain_solver_name(const std::string& name) {
  if (name == "auto") return "rotor";
  return name == "none" ? "store-all" : name;
}

}  // namespace

bool is_chain_file(const std::string& path) {
  return detect_file_kind(read_text_file(path), path) == FileKind::kChain;
}

std::string chain_solver_help() {
  std::string out = "\nChain solvers (for chain files):";
  for (const rotor::ChainSolverEntry& e : rotor::chain_solver_registry())
    out += fmt::format("\n  {:<10} {}\n{}", e.name, e.description,
                       params_help(e.make()->params(), "      --param "));
  return out;
}

void run_chain_info(const std::string& path, bool json) {
  const Chain chain = read_valid_chain(path);
  const ChainEvaluation all = store_all(chain);
  const rotor::ChainArrays<int64_t> arrays = rotor::chain_arrays(chain);
  const int64_t least_persistent =
      rotor::persistent_min_memory(arrays, rotor::PersistentFamily::kRotor).bytes;
  // The weak family's least budget is O(L^5) to compute; skip it on long chains.
  constexpr int kWeakInfoMaxLength = 60;
  const bool weak = chain.length() <= kWeakInfoMaxLength;
  const int64_t least_weak = weak ? rotor::weak_min_memory(arrays)->bytes : -1;
  double forward = 0, backward = 0;
  for (const ChainStage& s : chain.stages) forward += s.u_f, backward += s.u_b;
  if (json) {
    nlohmann::json doc = {{"name", chain.name},
                          {"length", chain.length()},
                          {"input_bytes", chain.input.a},
                          {"forward_time", forward},
                          {"backward_time", backward},
                          {"store_all_makespan", all.makespan},
                          {"store_all_peak_bytes", all.peak_bytes},
                          {"least_budget_persistent_bytes", least_persistent}};
    if (weak) doc["least_budget_weak_bytes"] = least_weak;
    emit(doc.dump(2) + "\n", "");
    return;
  }
  std::string out = fmt::format("chain              {}\n", chain.name.empty() ? path : chain.name);
  out += fmt::format("length             {} stages + loss\n", chain.length());
  out += fmt::format("input a^0          {} bytes ({})\n", chain.input.a, mib(chain.input.a));
  out += fmt::format("forward, backward  {:.10g}, {:.10g}\n", forward, backward);
  out += fmt::format("store-all          makespan {:.10g}, peak {} bytes ({})\n", all.makespan,
                     all.peak_bytes, mib(all.peak_bytes));
  out += fmt::format("least budget       {} bytes ({}) persistent (rotor)\n", least_persistent,
                     mib(least_persistent));
  if (weak)
    out += fmt::format("                   {} bytes ({}) any sequence (rotor, persistence=weak)\n",
                       least_weak, mib(least_weak));
  emit(out, "");
}

void run_chain_solve(const std::string& path, const std::string& budget_text,
                     const std::string& solver, const std::string& output, bool json,
                     const SolverArgs& solver_args) {
  const Chain chain = read_valid_chain(path);
  const ChainEvaluation all = store_all(chain);
  const Budget budget = parse_budget(budget_text, all.peak_bytes);
  rotor::ChainSolveOptions options = chain_options(solver_args, budget, solver);
  ProgressBar bar(solver);
  options.on_progress = bar.callback();
  const ChainSolveResult r = rotor::solve_chain(chain, chain_solver_name(solver), options);
  reject_infeasible(path, r, budget);
  const std::string plan_json = rotor::chain_plan_to_json(chain, r, budget);
  if (!output.empty()) emit(plan_json, output);
  if (json) {
    emit(plan_json, "");
    return;
  }
  const double overhead = percent(r.eval.makespan - all.makespan, all.makespan);
  std::string out = fmt::format("solver    {}\n", r.plan.solver);
  out += fmt::format("status    {}\n", to_string(r.plan.stats.status));
  out += fmt::format("budget    {} bytes ({})\n", budget.bytes, mib(budget.bytes));
  out += fmt::format(
      "peak      {} bytes ({}, {:.1f}% of store-all)\n", r.eval.peak_bytes, mib(r.eval.peak_bytes),
      percent(static_cast<double>(r.eval.peak_bytes), static_cast<double>(all.peak_bytes)));
  out += fmt::format("makespan  {:.10g} ({:+.2f}% over store-all {:.10g})\n", r.eval.makespan,
                     overhead, all.makespan);
  out += fmt::format("ops       {}\n", r.plan.ops.size());
  out += fmt::format("time      {:.3f} s\n", r.plan.stats.wall_time_s);
  if (r.plan.ops.size() <= 200)
    out += fmt::format("sequence  {}\n", rotor::format_sequence(r.plan.ops));
  emit(out, "");
}

void run_chain_compare(const std::string& path, const std::vector<std::string>& budget_texts,
                       const std::vector<std::string>& solvers, bool json,
                       const SolverArgs& solver_args) {
  const Chain chain = read_valid_chain(path);
  const ChainEvaluation all = store_all(chain);
  std::vector<std::string> names;
  for (const std::string& name : solvers) names.push_back(chain_solver_name(name));
  for (const std::string& name : names) (void)rotor::make_chain_solver(name);
  std::vector<Budget> budgets;
  for (const std::string& text : budget_texts)
    budgets.push_back(parse_budget(text, all.peak_bytes));
  struct Row {
    std::string solver, budget_text;
    Budget budget;
    ChainSolveResult result;
  };
  std::vector<Row> rows;
  for (const std::string& solver : names)
    for (size_t b = 0; b < budgets.size(); ++b) {
      rotor::ChainSolveOptions options = chain_options(solver_args, budgets[b], solver);
      ProgressBar bar(fmt::format("{} @ {}", solver, budget_texts[b]));
      options.on_progress = bar.callback();
      rows.push_back(
          {solver, budget_texts[b], budgets[b], rotor::solve_chain(chain, solver, options)});
    }
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows) {
      nlohmann::json item = {
          {"solver", r.solver},
          {"budget", r.budget_text},
          {"budget_bytes", r.budget.bytes},
          {"status", to_string(r.result.plan.stats.status)},
          {"feasible", r.result.eval.peak_bytes <= r.budget.bytes},
          {"peak_bytes", r.result.eval.peak_bytes},
          {"makespan", r.result.eval.makespan},
          {"overhead_percent", percent(r.result.eval.makespan - all.makespan, all.makespan)},
          {"solve_time_s", r.result.plan.stats.wall_time_s}};
      if (r.result.plan.stats.min_feasible_budget)
        item["min_feasible_budget_bytes"] = *r.result.plan.stats.min_feasible_budget;
      out.push_back(std::move(item));
    }
    emit(out.dump(2) + "\n", "");
    return;
  }
  Table table(
      {"solver", "budget", "budget MiB", "status", "peak MiB", "makespan", "overhead %", "time s"});
  for (const Row& r : rows) {
    const bool fits = r.result.eval.peak_bytes <= r.budget.bytes;
    table.add(
        {r.solver, r.budget_text, fmt::format("{:.2f}", r.budget.bytes / double(1 << 20)),
         std::string(to_string(r.result.plan.stats.status)),
         fits ? fmt::format("{:.2f}", r.result.eval.peak_bytes / double(1 << 20)) : "-",
         fits ? fmt::format("{:.6g}", r.result.eval.makespan) : "-",
         fits ? fmt::format("{:.2f}", percent(r.result.eval.makespan - all.makespan, all.makespan))
              : "-",
         fmt::format("{:.3f}", r.result.plan.stats.wall_time_s)});
  }
  std::string out = fmt::format("chain {} (L = {}): store-all makespan {:.6g}, peak {}\n\n",
                                chain.name.empty() ? path : chain.name, chain.length(),
                                all.makespan, mib(all.peak_bytes));
  emit(out + table.str(), "");
}

void run_chain_simulate(const std::string& chain_path, const std::string& plan_path, bool timeline,
                        bool json) {
  const Chain chain = read_valid_chain(chain_path);
  const rotor::ChainSequence ops =
      rotor::parse_chain_plan_json(read_text_file(plan_path), plan_path);
  const ChainEvaluation e = rotor::simulate_chain(chain, ops);
  if (!e.valid) throw InputError(fmt::format("{}: invalid plan: {}", plan_path, e.error));
  if (json) {
    nlohmann::json doc = {{"valid", true},
                          {"ops", ops.size()},
                          {"makespan", e.makespan},
                          {"peak_bytes", e.peak_bytes},
                          {"peak_op", e.peak_op}};
    if (timeline) doc["memory"] = e.memory;
    emit(doc.dump(2) + "\n", "");
    return;
  }
  std::string out = "valid     yes\n";
  out += fmt::format("ops       {}\n", ops.size());
  out += fmt::format("makespan  {:.10g}\n", e.makespan);
  out +=
      fmt::format("peak      {} bytes ({}) at op {}\n", e.peak_bytes, mib(e.peak_bytes), e.peak_op);
  if (timeline) {
    out += "\nop  name  memory_bytes\n";
    for (size_t i = 0; i < ops.size(); ++i)
      out += fmt::format("{} {} {}\n", i, rotor::format_sequence({&ops[i], 1}), e.memory[i]);
  }
  emit(out, "");
}

void register_gen_chain(CLI::App& gen) {
  struct Args {
    rotor::ChainGenParams params;
    std::string output;
  };
  auto args = std::make_shared<Args>();
  rotor::ChainGenParams& p = args->params;
  CLI::App* cmd =
      gen.add_subcommand("chain", "heterogeneous chain (Rotor model): ResNet-like or random");
  cmd->add_option("--kind", p.kind, "resnet or random")->default_val(p.kind);
  cmd->add_option("--length,-L", p.length, "stages before the loss")->default_val(p.length);
  cmd->add_option("--seed", p.seed, "random seed")->default_val(p.seed);
  cmd->add_option("--batch", p.batch, "resnet: images per batch")->default_val(p.batch);
  cmd->add_option("--min-size", p.min_size, "random: smallest size")->default_val(p.min_size);
  cmd->add_option("--max-size", p.max_size, "random: largest size")->default_val(p.max_size);
  cmd->add_option("--max-time", p.max_time, "random: largest u_f, u_b")->default_val(p.max_time);
  cmd->add_option("--output,-o", args->output, "output file (default: stdout)");
  cmd->callback([args] { emit(chain_to_json(rotor::generate_chain(args->params)), args->output); });
}

}  // namespace remat::cli
