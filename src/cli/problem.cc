#include "problem.h"

#include <fmt/format.h>

#include "remat/error.h"
#include "remat/io.h"

namespace remat::cli {

std::string Problem::display_name() const {
  const std::string& name = chain() ? chain()->name : graph()->name();
  return escape_control(name.empty() ? path : name);
}

Problem read_problem(const std::string& path) {
  // One read and one parse: on a large graph the parse is most of the time.
  std::variant<Graph, Chain> data = parse_graph_or_chain(read_text_file(path), path);
  Problem p{.path = path};
  if (Chain* parsed_chain = std::get_if<Chain>(&data)) {
    Chain chain = std::move(*parsed_chain);
    validate_chain(chain, path);
    const ChainEvaluation all = simulate_chain(chain, store_all_sequence(chain));
    p.baseline_peak = all.peak_bytes;
    p.baseline_cost = all.cost;
    p.data = std::move(chain);
  } else {
    Graph graph = std::get<Graph>(std::move(data));
    const Baseline base = baseline(graph);
    p.baseline_peak = base.peak_bytes;
    p.baseline_cost = base.cost;
    p.data = std::move(graph);
  }
  return p;
}

std::optional<std::string> refusal(const Problem& problem, std::string_view solver) {
  const SolverEntry& row = solver_entry(solver);
  return problem.chain() ? not_applicable(row, *problem.chain())
                         : not_applicable(row, *problem.graph());
}

Outcome solve_problem(const Problem& problem, std::string_view solver,
                      const SolveOptions& options) {
  Outcome o;
  if (const Chain* chain = problem.chain()) {
    ChainSolveResult r = solve(*chain, solver, options);
    o.plan_json = chain_plan_to_json(*chain, r, options.budget);
    o.peak_bytes = r.eval.peak_bytes;
    o.cost = r.eval.cost;
    o.steps = static_cast<int64_t>(r.plan.sequence.size());
    o.recomputations = o.steps - 2 * (chain->length() + 1);
    o.sequence_text = format_sequence(r.plan.sequence);
    o.solver = std::move(r.plan.solver);
    o.stats = std::move(r.plan.stats);
    return o;
  }
  const Graph& graph = *problem.graph();
  SolveResult r = solve(graph, solver, options);
  o.plan_json = plan_to_json(graph, r, options.budget);
  o.peak_bytes = r.eval.peak_bytes;
  o.cost = r.eval.cost;
  o.steps = static_cast<int64_t>(r.plan.sequence.size());
  o.recomputations = o.steps - graph.num_nodes();
  o.solver = std::move(r.plan.solver);
  o.stats = std::move(r.plan.stats);
  return o;
}

}  // namespace remat::cli
