// bindings.cc — the pybind11 module `remat._remat`: the core seen from Python.
// Graphs are built from plain lists of dicts (the remat-graph JSON fields), solved with the judged
// remat::solve() and checked with remat::simulate(); every peak and cost Python sees comes from the
// simulator. InputError derives from std::invalid_argument, so Python receives ValueError with the
// core's message; InternalError (a bug) arrives as RuntimeError, never as the end of the process.
// Ctrl-C during a solve raises KeyboardInterrupt as soon as the solver checks its time limit.
//   g = _remat.Graph.build("mlp", values=[{"name": "x", "size": 64}, ...], nodes=[...])
//   r = _remat.solve(g, "50%", "none", time_limit=1.0, seed=1, threads=1, params={},
//                    progress=lambda stage, fraction, iterations, best: print(stage, fraction))
#include <fmt/format.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "blocks/summary.h"
#include "remat/error.h"
#include "remat/graph.h"
#include "remat/interrupt.h"
#include "remat/io.h"
#include "remat/lower.h"
#include "remat/registry.h"
#include "remat/simulate.h"

namespace py = pybind11;

namespace remat::python {
namespace {

// Value names declared so far, for name references (the first of equal names wins); one hash
// lookup per reference keeps Graph.build linear.
using ValueNames = std::unordered_map<std::string, int32_t>;

// Every wrongly typed field is an InputError (ValueError in Python) that names it, instead of
// pybind11's "Unable to cast" without a name.
[[noreturn]] void wrong_type(std::string_view where, std::string_view key, std::string_view want,
                             const py::handle& got) {
  throw InputError(fmt::format("python: {} field '{}' must be {} (got {} {})", where, key, want,
                               py::str(py::type::of(got).attr("__name__")).cast<std::string>(),
                               shorten(py::repr(got).cast<std::string>(), 60)));
}

// Text fields must be str: bytes would make names that no JSON file can hold.
std::string text_field(const py::dict& d, const char* key, std::string fallback,
                       std::string_view where) {
  if (!d.contains(key)) return fallback;
  const py::handle item = d[key];
  if (!py::isinstance<py::str>(item)) wrong_type(where, key, "str", item);
  return item.cast<std::string>();
}

int64_t int_field(const py::dict& d, const char* key, int64_t fallback, std::string_view where) {
  if (!d.contains(key)) return fallback;
  const py::handle item = d[key];
  if (!py::isinstance<py::int_>(item) || py::isinstance<py::bool_>(item))
    wrong_type(where, key, "int", item);
  try {
    return item.cast<int64_t>();
  } catch (const py::cast_error&) {
    throw InputError(fmt::format("python: {} field '{}' is {}, outside the 64-bit range", where,
                                 key, shorten(py::repr(item).cast<std::string>(), 40)));
  }
}

double number_field(const py::dict& d, const char* key, double fallback, std::string_view where) {
  if (!d.contains(key)) return fallback;
  const py::handle item = d[key];
  if (py::isinstance<py::bool_>(item) ||
      !(py::isinstance<py::int_>(item) || py::isinstance<py::float_>(item)))
    wrong_type(where, key, "a number", item);
  return item.cast<double>();
}

bool bool_field(const py::dict& d, const char* key, bool fallback, std::string_view where) {
  if (!d.contains(key)) return fallback;
  const py::handle item = d[key];
  if (!py::isinstance<py::bool_>(item)) wrong_type(where, key, "bool", item);
  return item.cast<bool>();
}

// The fields remat-graph JSON requires (docs/formats.md) are required here too, so a graph means
// the same built from Python as read from a file.
void require_field(const py::dict& d, const char* key, std::string_view where) {
  if (!d.contains(key))
    throw InputError(
        fmt::format("python: {} has no '{}' (required, as in remat-graph JSON)", where, key));
}

// Reads a value reference: an index or the name of a value declared before.
ValueId value_ref(const ValueNames& names, const py::handle& ref, std::string_view where) {
  if (py::isinstance<py::str>(ref)) {
    const std::string name = ref.cast<std::string>();
    const auto found = names.find(name);
    if (found == names.end())
      throw InputError(
          fmt::format("python: {} refers to unknown value '{}'", where, shorten(name, 80)));
    return ValueId{found->second};
  }
  if (!py::isinstance<py::int_>(ref) || py::isinstance<py::bool_>(ref))
    throw InputError(fmt::format("python: {} must list value indices or names", where));
  const int64_t index = ref.cast<int64_t>();
  if (index < 0 || index > INT32_MAX)
    throw InputError(fmt::format("python: {} refers to value index {}, out of range", where,
                                 shorten(py::repr(ref).cast<std::string>(), 40)));
  return ValueId{static_cast<int32_t>(index)};
}

std::vector<ValueId> value_refs(const ValueNames& names, const py::dict& d, const char* key,
                                std::string_view where) {
  std::vector<ValueId> out;
  if (!d.contains(key)) return out;
  const py::handle list = d[key];
  if (!py::isinstance<py::list>(list) && !py::isinstance<py::tuple>(list))
    wrong_type(where, key, "a list of value indices or names", list);
  for (const py::handle ref : list) out.push_back(value_ref(names, ref, where));
  return out;
}

void check_keys(const py::dict& d, std::span<const std::string_view> known, std::string_view what) {
  for (const auto& item : d) {
    const std::string key = py::str(item.first);
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == key;
    if (!ok)
      throw InputError(fmt::format("python: {} has unknown field '{}' (known: {})", what,
                                   shorten(key, 60), fmt::join(known, ", ")));
  }
}

Value value_from_dict(const ValueNames& names, const py::dict& d, size_t index) {
  static constexpr std::string_view kKnown[] = {"name", "size", "output", "alias_of"};
  const std::string where = fmt::format("value {}", index);
  check_keys(d, kKnown, where);
  Value v;
  v.name = text_field(d, "name", fmt::format("v{}", index), where);
  require_field(d, "size", where);
  v.size_bytes = int_field(d, "size", 0, where);
  v.is_output = bool_field(d, "output", false, where);
  if (d.contains("alias_of") && !d["alias_of"].is_none())
    v.alias_of = value_ref(names, d["alias_of"], where + " alias_of");
  return v;
}

Node node_from_dict(const ValueNames& names, const py::dict& d, size_t index) {
  static constexpr std::string_view kKnown[] = {"name", "cost",  "inputs", "outputs",     "op",
                                                "kind", "phase", "temp",   "recomputable"};
  const std::string where = fmt::format("node {}", index);
  check_keys(d, kKnown, where);
  Node n;
  n.name = text_field(d, "name", fmt::format("n{}", index), where);
  require_field(d, "cost", where);
  n.cost = number_field(d, "cost", 0.0, where);
  n.op = text_field(d, "op", "", where);
  n.temp_bytes = int_field(d, "temp", 0, where);
  n.recomputable = bool_field(d, "recomputable", true, where);
  const std::string kind = text_field(d, "kind", "other", where);
  const std::optional<OpKind> parsed_kind = parse_op_kind(kind);
  if (!parsed_kind)
    throw InputError(fmt::format("python: {} has unknown kind '{}'", where, shorten(kind, 40)));
  n.kind = *parsed_kind;
  const std::string phase = text_field(d, "phase", "", where);
  if (!phase.empty()) {
    const std::optional<Phase> parsed_phase = parse_phase(phase);
    if (!parsed_phase)
      throw InputError(fmt::format("python: {} has unknown phase '{}'", where, shorten(phase, 40)));
    n.phase = *parsed_phase;
  }
  n.inputs = value_refs(names, d, "inputs", where);
  n.outputs = value_refs(names, d, "outputs", where);
  return n;
}

Graph build_graph(const py::object& name, const py::list& values, const py::list& nodes) {
  if (!py::isinstance<py::str>(name))
    throw InputError(fmt::format("python: the graph name must be str (got {})",
                                 py::str(py::type::of(name).attr("__name__")).cast<std::string>()));
  GraphSpec spec;
  spec.name = name.cast<std::string>();
  ValueNames names;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!py::isinstance<py::dict>(values[i]))
      throw InputError(fmt::format("python: value {} must be a dict", i));
    spec.values.push_back(value_from_dict(names, values[i].cast<py::dict>(), i));
    names.emplace(spec.values.back().name, static_cast<int32_t>(i));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!py::isinstance<py::dict>(nodes[i]))
      throw InputError(fmt::format("python: node {} must be a dict", i));
    spec.nodes.push_back(node_from_dict(names, nodes[i].cast<py::dict>(), i));
  }
  Graph graph = Graph::build(std::move(spec), "python");
  require_outputs(graph, "python");
  return graph;
}

std::vector<int32_t> value_indices(std::span<const ValueId> ids) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (ValueId v : ids) out.push_back(v.value());
  return out;
}

py::dict node_to_dict(const Graph& g, int32_t index) {
  if (index < 0 || index >= g.num_nodes())
    throw py::index_error(fmt::format("node index {} out of range", index));
  const Node& n = g.node(NodeId{index});
  py::dict d;
  d["name"] = n.name;
  d["cost"] = n.cost;
  d["inputs"] = value_indices(n.inputs);
  d["outputs"] = value_indices(n.outputs);
  d["op"] = n.op;
  d["kind"] = std::string(to_string(n.kind));
  d["phase"] = std::string(to_string(n.phase));
  d["temp"] = n.temp_bytes;
  d["recomputable"] = n.recomputable;
  return d;
}

py::dict value_to_dict(const Graph& g, int32_t index) {
  if (index < 0 || index >= g.num_values())
    throw py::index_error(fmt::format("value index {} out of range", index));
  const Value& v = g.value(ValueId{index});
  py::dict d;
  d["name"] = v.name;
  d["size"] = v.size_bytes;
  d["output"] = v.is_output;
  d["alias_of"] = v.alias_of.valid() ? py::object(py::int_(v.alias_of.value())) : py::none();
  return d;
}

Sequence to_sequence(const Graph& g, const std::vector<int32_t>& ids) {
  Sequence seq;
  seq.reserve(ids.size());
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || ids[t] >= g.num_nodes())
      throw InputError(fmt::format("python: step {} names node {}, but the graph has {} nodes", t,
                                   ids[t], g.num_nodes()));
    seq.push_back(NodeId{ids[t]});
  }
  return seq;
}

// A budget is bytes (int) or text ("50%" of `baseline_peak_bytes`, "90MB"), read by the CLI's
// --budget reader. `baseline_peak_bytes` is called only for a percentage.
template <typename BaselinePeak>
Budget to_budget(const py::object& budget, BaselinePeak baseline_peak_bytes) {
  const bool number = !py::isinstance<py::bool_>(budget) &&
                      (py::isinstance<py::int_>(budget) || py::isinstance<py::float_>(budget));
  // Bytes go through the reader as the number's text: the same range and exact integers (2^62 + 1
  // is refused, not read as 2^62), and nan, inf or -1 refused alike.
  if (number) return parse_budget(py::str(budget).cast<std::string>(), 0);
  if (py::isinstance<py::str>(budget))
    return parse_budget(budget.cast<std::string>(), baseline_peak_bytes());
  throw InputError("python: budget must be bytes (int) or text such as \"50%\" or \"90MB\"");
}

Budget to_budget(const Graph& g, const py::object& budget) {
  return to_budget(budget, [&] { return baseline(g).peak_bytes; });
}

std::string param_text(const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>() ? "true" : "false";
  return py::str(value).cast<std::string>();
}

struct PySolveResult {
  std::vector<int32_t> sequence;
  std::string solver;
  std::string status;
  bool feasible = false;
  int64_t budget_bytes = 0;
  int64_t peak_bytes = 0;
  double cost = 0;
  int64_t baseline_peak_bytes = 0;
  double baseline_cost = 0;
  double wall_time_s = 0;
  std::string stop_reason;  // converged, work_limit, time_limit, interrupted
  int64_t iterations = 0;
  std::optional<double> cost_lower_bound;
  std::optional<int64_t> min_feasible_budget;
  std::vector<std::pair<std::string, double>> counters;
  std::vector<std::pair<std::string, std::vector<double>>> series;
  std::vector<std::pair<std::string, std::vector<std::string>>> lists;
  std::vector<int32_t> recomputed;  // nodes the sequence runs more than once, ascending
  std::string plan_json;            // the plan file `remat solve -o` writes (one writer)
};

std::vector<int32_t> recomputed_nodes(const Graph& g, const Sequence& seq) {
  std::vector<int32_t> runs(static_cast<size_t>(g.num_nodes()), 0);
  for (NodeId n : seq) ++runs[static_cast<size_t>(n.value())];
  std::vector<int32_t> out;
  for (int32_t i = 0; i < g.num_nodes(); ++i)
    if (runs[static_cast<size_t>(i)] > 1) out.push_back(i);
  return out;
}

// What a solve run with the GIL released needs from Python. The progress callback is called
// from solver threads with the GIL taken; the signal poll runs on the calling thread through
// remat::InterruptPoll, so Ctrl-C (Python's SIGINT handler raising KeyboardInterrupt) stops the
// solve at the solver's next time-limit check. The first Python error, from the callback or a
// signal handler, stops the solve and is raised once the solver has returned (a solver cannot be
// unwound through).
class PythonSide {
 public:
  explicit PythonSide(py::object progress) : progress_(std::move(progress)) {}

  void attach(SolveOptions& options) {
    if (!progress_.is_none()) options.on_progress = [this](const Progress& p) { report(p); };
  }

  // Runs `solve` with the GIL released and the signal poll installed; then raises the first
  // Python error, if any.
  template <class Solve>
  auto run(Solve solve) {
    decltype(solve()) result;
    {
      py::gil_scoped_release release;
      const InterruptPoll poll(&PythonSide::poll, this);
      result = solve();
    }
    if (error_) throw std::move(*error_);
    return result;
  }

 private:
  void report(const Progress& p) {
    py::gil_scoped_acquire gil;
    if (error_) return;
    try {
      progress_(std::string(p.stage), p.fraction, p.iterations, p.best_objective, p.best_peak_bytes,
                p.best_cost);
    } catch (py::error_already_set& e) {
      error_ = std::move(e);
    }
  }

  // InterruptPoll's function: true once a Python error is pending (a signal handler raised, or
  // the progress callback did).
  static bool poll(void* context) noexcept {
    auto* self = static_cast<PythonSide*>(context);
    try {
      py::gil_scoped_acquire gil;
      if (!self->error_ && PyErr_CheckSignals() != 0) self->error_.emplace();  // fetches it
      return self->error_.has_value();
    } catch (...) {
      return false;
    }
  }

  py::object progress_;
  std::optional<py::error_already_set> error_;
};

// What solvers keep between solves (rockmate's block options), for every solve of the process.
SolveCache& process_cache() {
  static SolveCache cache;
  return cache;
}

PySolveResult solve_py(const Graph& g, const py::object& budget, const std::string& solver,
                       double time_limit, uint64_t seed, int threads, const py::dict& params,
                       const py::object& progress, const std::optional<std::vector<int32_t>>& start,
                       double work_limit) {
  SolveOptions options;
  options.budget = to_budget(g, budget);
  if (start) options.start = to_sequence(g, *start);
  options.work_limit = work_limit;
  options.time_limit_s = time_limit;
  options.seed = seed;
  options.threads = threads;
  options.cache = &process_cache();
  for (const auto& item : params) options.params[py::str(item.first)] = param_text(item.second);
  PythonSide side(progress);
  side.attach(options);
  const SolveResult r = side.run([&] { return solve(g, solver, options); });
  const Baseline base = baseline(g);
  PySolveResult out;
  out.sequence = node_indices(r.plan.sequence);
  out.solver = r.plan.solver;
  out.status = std::string(to_string(r.plan.stats.status));
  out.feasible =
      r.plan.stats.status == SolveStatus::kOptimal || r.plan.stats.status == SolveStatus::kFeasible;
  out.budget_bytes = options.budget.bytes;
  out.peak_bytes = r.eval.peak_bytes;
  out.cost = r.eval.cost;
  out.baseline_peak_bytes = base.peak_bytes;
  out.baseline_cost = base.cost;
  out.wall_time_s = r.plan.stats.wall_time_s;
  out.stop_reason = std::string(to_string(r.plan.stats.stop_reason));
  out.iterations = r.plan.stats.iterations;
  out.cost_lower_bound = r.plan.stats.cost_lower_bound;
  out.min_feasible_budget = r.plan.stats.min_feasible_budget;
  out.counters = r.plan.stats.counters;
  out.series = r.plan.stats.series;
  out.lists = r.plan.stats.lists;
  out.recomputed = recomputed_nodes(g, r.plan.sequence);
  out.plan_json = plan_to_json(g, r, options.budget);
  return out;
}

// A plan file for a sequence that no solve returned (a plan given by hand, or the default
// schedule put in a solver's place): the same writer, the simulator's figures, no solver stats.
std::string sequence_plan_json(const Graph& g, const std::vector<int32_t>& sequence,
                               int64_t budget_bytes, const std::string& solver,
                               const std::string& status) {
  SolveResult r;
  r.plan.sequence = to_sequence(g, sequence);
  r.plan.solver = solver;
  const std::optional<SolveStatus> parsed = parse_solve_status(status);
  if (!parsed) throw InputError(fmt::format("python: unknown plan status '{}'", shorten(status)));
  r.plan.stats.status = *parsed;
  r.eval = simulate(g, r.plan.sequence);
  if (!r.eval.valid) throw InputError("python: the sequence is not a valid plan: " + r.eval.error);
  return plan_to_json(g, r, Budget{budget_bytes});
}

// Reads a plan file with the one reader (format, fingerprint and step names checked against
// `g`); returns (node ids, solver, status, the file's text).
py::tuple read_plan_py(const Graph& g, const std::string& path) {
  const std::string text = read_text_file(path);
  const Plan plan = parse_plan_json(g, text, path);
  return py::make_tuple(node_indices(plan.sequence), plan.solver,
                        std::string(to_string(plan.stats.status)), text);
}

// Chains cross as the bound remat::Chain; its JSON text is read and written by io only
// (parse_chain_json, chain_to_json). Functions taking a chain also take that text, as before.
Chain chain_arg(const py::handle& chain) {
  if (py::isinstance<Chain>(chain)) return chain.cast<Chain>();
  if (py::isinstance<py::str>(chain))
    return parse_chain_json(chain.cast<std::string>(), "python chain");
  throw InputError(
      fmt::format("python: a chain must be a remat.Chain or remat chain JSON text "
                  "(got {})",
                  py::str(py::type::of(chain).attr("__name__")).cast<std::string>()));
}

// The sizes of a^ℓ, ā^ℓ and δ^ℓ from keyword fields; ā and δ default to a, as in chain JSON.
ChainSizes sizes_from_fields(const py::dict& fields, std::string_view where) {
  ChainSizes s;
  require_field(fields, "a", where);
  s.a = int_field(fields, "a", 0, where);
  s.abar = int_field(fields, "abar", s.a, where);
  s.delta = int_field(fields, "delta", s.a, where);
  return s;
}

ChainSizes chain_sizes_py(const py::kwargs& fields) {
  static constexpr std::string_view kKnown[] = {"a", "abar", "delta"};
  check_keys(fields, kKnown, "ChainSizes");
  return sizes_from_fields(fields, "ChainSizes");
}

ChainStage chain_stage_py(const py::kwargs& fields) {
  static constexpr std::string_view kKnown[] = {"name", "u_f",   "u_b", "a",
                                                "abar", "delta", "o_f", "o_b"};
  check_keys(fields, kKnown, "ChainStage");
  ChainStage stage;
  stage.name = text_field(fields, "name", "", "ChainStage");
  stage.u_f = number_field(fields, "u_f", 0.0, "ChainStage");
  stage.u_b = number_field(fields, "u_b", 0.0, "ChainStage");
  stage.sizes = sizes_from_fields(fields, "ChainStage");
  stage.o_f = int_field(fields, "o_f", 0, "ChainStage");
  stage.o_b = int_field(fields, "o_b", 0, "ChainStage");
  return stage;
}

// A chain built in Python is checked as a chain file is: a stage before the loss, the limits.
Chain chain_py(const std::string& name, const ChainSizes& input,
               const std::vector<ChainStage>& stages) {
  Chain chain{.name = name, .input = input, .stages = stages};
  validate_chain(chain, "python chain");
  return chain;
}

ChainSequence chain_ops(const py::handle& ops) {
  ChainSequence seq;
  for (const py::handle op : ops) {
    const auto pair = op.cast<std::pair<std::string, int32_t>>();
    const std::optional<ChainOpKind> kind = parse_op_name(pair.first);
    if (!kind) throw InputError(fmt::format("python: unknown chain op '{}'", pair.first));
    seq.push_back({*kind, pair.second});
  }
  return seq;
}

py::list ops_list(std::span<const ChainOp> ops) {
  py::list out;
  for (const ChainOp& op : ops) out.append(py::make_tuple(std::string(op_name(op.kind)), op.stage));
  return out;
}

// The judged solve of the one registry on a chain: the same options as for a graph (seed,
// threads, progress); the dict has the graph result's field names (cost is the makespan, also
// under its chain name).
// A budget in percent is of the chain's store-all peak.
py::dict chain_solve_py(const py::object& chain_or_text, const py::object& budget,
                        const std::string& solver, double time_limit, const py::dict& params,
                        uint64_t seed, int threads, const py::object& progress, double work_limit) {
  const Chain chain = chain_arg(chain_or_text);
  const ChainEvaluation store_all = simulate_chain(chain, store_all_sequence(chain));
  SolveOptions options;
  options.budget = to_budget(budget, [&] { return store_all.peak_bytes; });
  options.work_limit = work_limit;
  options.time_limit_s = time_limit;
  options.seed = seed;
  options.threads = threads;
  for (const auto& item : params) options.params[py::str(item.first)] = param_text(item.second);
  PythonSide side(progress);
  side.attach(options);
  const ChainSolveResult r = side.run([&] { return solve(chain, solver, options); });
  py::dict d;
  d["ops"] = ops_list(r.plan.sequence);
  d["notation"] = format_sequence(r.plan.sequence);
  d["solver"] = r.plan.solver;
  d["status"] = std::string(to_string(r.plan.stats.status));
  d["feasible"] =
      r.plan.stats.status == SolveStatus::kOptimal || r.plan.stats.status == SolveStatus::kFeasible;
  d["budget_bytes"] = options.budget.bytes;
  d["peak_bytes"] = r.eval.peak_bytes;
  d["cost"] = r.eval.cost;
  d["makespan"] = r.eval.cost;
  d["timeline"] = r.eval.timeline;
  d["memory"] = r.eval.timeline;
  d["baseline_peak_bytes"] = store_all.peak_bytes;
  d["baseline_cost"] = store_all.cost;
  d["store_all_peak_bytes"] = store_all.peak_bytes;
  d["store_all_makespan"] = store_all.cost;
  d["iterations"] = r.plan.stats.iterations;
  d["cost_lower_bound"] = r.plan.stats.cost_lower_bound
                              ? py::object(py::float_(*r.plan.stats.cost_lower_bound))
                              : py::none();
  d["lists"] = r.plan.stats.lists;
  d["wall_time_s"] = r.plan.stats.wall_time_s;
  d["stop_reason"] = std::string(to_string(r.plan.stats.stop_reason));
  d["min_feasible_budget"] = r.plan.stats.min_feasible_budget
                                 ? py::object(py::int_(*r.plan.stats.min_feasible_budget))
                                 : py::none();
  d["counters"] = r.plan.stats.counters;
  return d;
}

py::dict chain_evaluation_dict(const ChainEvaluation& e) {
  py::dict d;
  d["valid"] = e.valid;
  d["error"] = e.error;
  d["peak_bytes"] = e.peak_bytes;
  d["cost"] = e.cost;
  d["makespan"] = e.cost;
  d["timeline"] = e.timeline;
  d["memory"] = e.timeline;
  return d;
}

py::dict chain_simulate_py(const py::object& chain_or_text, const py::list& ops) {
  return chain_evaluation_dict(simulate_chain(chain_arg(chain_or_text), chain_ops(ops)));
}

py::dict extract_chain_py(const Graph& g, int32_t max_stages) {
  const GraphChain gc = extract_chain(g, ChainExtractOptions{.max_stages = max_stages});
  py::list stages;
  for (const StageNodes& s : gc.stages) {
    py::dict d;
    d["forward"] = node_indices(s.forward);
    d["backward"] = node_indices(s.backward);
    d["output"] = value_indices(s.output);
    d["saved"] = value_indices(s.saved);
    stages.append(d);
  }
  py::dict d;
  d["chain"] = gc.chain;
  d["stages"] = stages;
  d["separators"] = node_indices(gc.separators);
  d["separator_candidates"] = gc.separator_candidates;
  d["resident_bytes"] = gc.resident_bytes;
  d["fixed_cost"] = gc.fixed_cost;
  std::vector<int32_t> helpers, shared;
  for (int32_t n = 0; n < g.num_nodes(); ++n)
    if (gc.backward_helper[NodeId{n}]) helpers.push_back(n);
  for (int32_t v = 0; v < g.num_values(); ++v)
    if (gc.shared[ValueId{v}]) shared.push_back(v);
  d["backward_helpers"] = helpers;
  d["shared"] = shared;
  d["note"] = gc.note;
  return d;
}

// Rockmate's blocks (rk-GB) and classes of identical blocks.
py::dict rockmate_blocks_py(const Graph& g) {
  const rockmate::BlocksSummary bs = rockmate::describe_blocks(g);
  py::list blocks, classes;
  for (const rockmate::BlockSummary& b : bs.blocks) {
    py::dict d;
    d["stage"] = b.stage;
    d["class"] = b.class_id;
    d["forward_nodes"] = b.forward_nodes;
    d["backward_nodes"] = b.backward_nodes;
    d["nodes"] = b.nodes;
    d["input_bytes"] = b.input_bytes;
    d["output_bytes"] = b.output_bytes;
    d["weight_bytes"] = b.weight_bytes;
    d["first"] = b.first;
    d["last"] = b.last;
    blocks.append(d);
  }
  for (const rockmate::ClassSummary& c : bs.classes) {
    py::dict d;
    d["hash"] = c.hash;
    d["members"] = c.members;
    classes.append(d);
  }
  py::dict d;
  d["blocks"] = blocks;
  d["classes"] = classes;
  d["note"] = bs.note;
  return d;
}

// Lowers chain ops (as chain_solve returns them) on the chain extracted with `max_stages`.
std::vector<int32_t> lower_chain_py(const Graph& g, int32_t max_stages, const py::list& ops) {
  const GraphChain gc = extract_chain(g, ChainExtractOptions{.max_stages = max_stages});
  std::vector<StageRun> runs;
  for (const ChainOp& op : chain_ops(ops))
    runs.push_back({op.stage, op.kind == ChainOpKind::kBackward});
  return node_indices(lower_chain_plan(g, gc, runs));
}

const char* role_name(PortfolioRole role) {
  switch (role) {
    case PortfolioRole::kBaseline:
      return "baseline";
    case PortfolioRole::kMember:
      return "member";
    case PortfolioRole::kFinisher:
      return "finisher";
    case PortfolioRole::kNone:
      break;
  }
  return "none";
}

// Every registry row as a dict: the data the core asks about each solver (remat/solver.h).
py::list solver_rows() {
  py::list out;
  for (const SolverEntry& e : solver_registry()) {
    py::list params;
    if (e.params != nullptr)
      for (const ParamInfo& p : e.params())
        params.append(py::make_tuple(std::string(p.key), std::string(p.default_text),
                                     std::string(p.unit), std::string(p.doc)));
    py::dict portfolio;
    portfolio["role"] = role_name(e.portfolio.role);
    portfolio["share"] = e.portfolio.share;
    portfolio["max_work"] = e.portfolio.max_work;
    portfolio["max_nodes"] = e.portfolio.max_nodes;
    py::dict d;
    d["name"] = std::string(e.name);
    d["description"] = std::string(e.description);
    d["graph"] = e.accepts.graph;
    d["chain"] = e.accepts.chain;
    d["needs_phases"] = e.accepts.needs_phases;
    d["needs_chain_structure"] = e.accepts.needs_chain_structure;
    d["params"] = params;
    d["accepts_start"] = e.accepts_start;
    d["minimises_cost"] = e.minimises_cost;
    d["keeps_default_order"] = e.keeps_default_order;
    d["fixed_order_param"] = std::string(e.fixed_order_param);
    d["warm_starts"] = e.warm_starts;
    d["warm_start_max_nodes"] = e.warm_start_max_nodes;
    d["portfolio"] = portfolio;
    d["on_chain"] = std::string(e.on_chain);
    out.append(d);
  }
  return out;
}

py::list solver_list() {
  py::list out;
  for (const SolverEntry& e : solver_registry())
    out.append(py::make_tuple(std::string(e.name), std::string(e.description)));
  return out;
}

}  // namespace
}  // namespace remat::python

PYBIND11_MODULE(_remat, m) {
  using namespace remat;
  using namespace remat::python;
  m.doc() = "remat core: graphs, the simulator, solvers and file formats";

  py::class_<Graph>(m, "Graph")
      .def_static("build", &build_graph, py::arg("name"), py::arg("values"), py::arg("nodes"),
                  "Builds and validates a graph from lists of value and node dicts.")
      .def_static(
          "from_json",
          [](const std::string& text, const std::string& source) {
            return parse_graph_json(text, source);
          },
          py::arg("text"), py::arg("source") = "json")
      .def("to_json", &graph_to_json)
      .def_property_readonly("name", &Graph::name)
      .def_property_readonly("num_nodes", &Graph::num_nodes)
      .def_property_readonly("num_values", &Graph::num_values)
      .def("node", &node_to_dict, py::arg("index"))
      .def("value", &value_to_dict, py::arg("index"))
      .def("producer",
           [](const Graph& g, int32_t v) -> py::object {
             if (v < 0 || v >= g.num_values()) throw py::index_error("value index out of range");
             const NodeId p = g.producer(ValueId{v});
             return p.valid() ? py::object(py::int_(p.value())) : py::none();
           })
      .def_property_readonly("graph_inputs",
                             [](const Graph& g) { return value_indices(g.graph_inputs()); })
      .def_property_readonly("graph_outputs",
                             [](const Graph& g) { return value_indices(g.graph_outputs()); })
      .def("find_node",
           [](const Graph& g, const std::string& name) -> py::object {
             const auto n = g.find_node(name);
             return n ? py::object(py::int_(n->value())) : py::none();
           })
      .def("find_value",
           [](const Graph& g, const std::string& name) -> py::object {
             const auto v = g.find_value(name);
             return v ? py::object(py::int_(v->value())) : py::none();
           })
      .def("__repr__", [](const Graph& g) {
        return fmt::format("<remat.Graph '{}': {} nodes, {} values>", g.name(), g.num_nodes(),
                           g.num_values());
      });

  py::class_<Evaluation>(m, "Evaluation")
      .def_readonly("valid", &Evaluation::valid)
      .def_readonly("error", &Evaluation::error)
      .def_readonly("error_step", &Evaluation::error_step)
      .def_readonly("peak_bytes", &Evaluation::peak_bytes)
      .def_readonly("peak_step", &Evaluation::peak_step)
      .def_readonly("cost", &Evaluation::cost)
      .def_readonly("timeline", &Evaluation::timeline)
      .def("__repr__", [](const Evaluation& e) {
        return e.valid ? fmt::format("<Evaluation valid peak={} cost={}>", e.peak_bytes, e.cost)
                       : fmt::format("<Evaluation invalid: {}>", e.error);
      });

  py::class_<PySolveResult>(m, "SolveResult")
      .def_readonly("sequence", &PySolveResult::sequence)
      .def_readonly("solver", &PySolveResult::solver)
      .def_readonly("status", &PySolveResult::status)
      .def_readonly("feasible", &PySolveResult::feasible)
      .def_readonly("budget_bytes", &PySolveResult::budget_bytes)
      .def_readonly("peak_bytes", &PySolveResult::peak_bytes)
      .def_readonly("cost", &PySolveResult::cost)
      .def_readonly("baseline_peak_bytes", &PySolveResult::baseline_peak_bytes)
      .def_readonly("baseline_cost", &PySolveResult::baseline_cost)
      .def_readonly("wall_time_s", &PySolveResult::wall_time_s)
      .def_readonly("stop_reason", &PySolveResult::stop_reason)
      .def_readonly("iterations", &PySolveResult::iterations)
      .def_readonly("cost_lower_bound", &PySolveResult::cost_lower_bound)
      .def_readonly("min_feasible_budget", &PySolveResult::min_feasible_budget)
      .def_readonly("counters", &PySolveResult::counters)
      .def_readonly("series", &PySolveResult::series)
      .def_readonly("lists", &PySolveResult::lists)
      .def_readonly("recomputed", &PySolveResult::recomputed)
      .def_readonly("plan_json", &PySolveResult::plan_json)
      .def("__repr__", [](const PySolveResult& r) {
        return fmt::format("<SolveResult {} {} peak={} cost={} budget={}>", r.solver, r.status,
                           r.peak_bytes, r.cost, r.budget_bytes);
      });

  py::class_<ChainSizes>(m, "ChainSizes")
      .def(py::init(&chain_sizes_py),
           "ChainSizes(a=..., abar=a, delta=a): bytes of a^l, abar^l and delta^l.")
      .def_readonly("a", &ChainSizes::a)
      .def_readonly("abar", &ChainSizes::abar)
      .def_readonly("delta", &ChainSizes::delta)
      .def("__repr__", [](const ChainSizes& s) {
        return fmt::format("ChainSizes(a={}, abar={}, delta={})", s.a, s.abar, s.delta);
      });

  py::class_<ChainStage>(m, "ChainStage")
      .def(py::init(&chain_stage_py),
           "ChainStage(name='', u_f=0, u_b=0, a=..., abar=a, delta=a, o_f=0, o_b=0): the "
           "fields of a chain JSON stage.")
      .def_readonly("name", &ChainStage::name)
      .def_readonly("u_f", &ChainStage::u_f)
      .def_readonly("u_b", &ChainStage::u_b)
      .def_property_readonly("a", [](const ChainStage& s) { return s.sizes.a; })
      .def_property_readonly("abar", [](const ChainStage& s) { return s.sizes.abar; })
      .def_property_readonly("delta", [](const ChainStage& s) { return s.sizes.delta; })
      .def_readonly("o_f", &ChainStage::o_f)
      .def_readonly("o_b", &ChainStage::o_b)
      .def("__repr__", [](const ChainStage& s) {
        return fmt::format("<ChainStage '{}' u_f={} u_b={} a={} abar={} delta={}>", s.name, s.u_f,
                           s.u_b, s.sizes.a, s.sizes.abar, s.sizes.delta);
      });

  py::class_<Chain>(m, "Chain")
      .def(py::init(&chain_py), py::arg("name"), py::arg("input"), py::arg("stages"),
           "A chain of stages 1..L and the loss as the last stage, checked as a chain file is.")
      .def_static(
          "from_json",
          [](const std::string& text, const std::string& source) {
            return parse_chain_json(text, source);
          },
          py::arg("text"), py::arg("source") = "python chain")
      .def("to_json", &chain_to_json, "The chain's remat chain JSON text (the one writer).")
      .def_readonly("name", &Chain::name)
      .def_readonly("input", &Chain::input)
      .def_readonly("stages", &Chain::stages)
      .def_property_readonly("length", &Chain::length, "L: the stages before the loss.")
      .def(
          "simulate",
          [](const Chain& c, const py::list& ops) {
            return chain_evaluation_dict(simulate_chain(c, chain_ops(ops)));
          },
          py::arg("ops"), "The chain simulator on ops [(name, stage)].")
      .def(
          "store_all_ops", [](const Chain& c) { return ops_list(store_all_sequence(c)); },
          "The default schedule: F_all^1..F_all^{L+1}, B^{L+1}..B^1.")
      .def(
          "store_all",
          [](const Chain& c) {
            return chain_evaluation_dict(simulate_chain(c, store_all_sequence(c)));
          },
          "The chain simulator on the default schedule.")
      .def("__eq__",
           [](const Chain& a, const Chain& b) { return chain_to_json(a) == chain_to_json(b); })
      .def(py::pickle([](const Chain& c) { return chain_to_json(c); },
                      [](const std::string& text) { return parse_chain_json(text, "pickle"); }))
      .def("__repr__", [](const Chain& c) {
        return fmt::format("<remat.Chain '{}': {} stages and the loss>", c.name, c.length());
      });

  m.def("load", &read_graph_file, py::arg("path"),
        "Reads a remat-graph JSON or NetworkX node-link file.");
  m.def(
      "save", [](const Graph& g, const std::string& path) { write_graph_file(path, g); },
      py::arg("graph"), py::arg("path"));
  m.def(
      "simulate",
      [](const Graph& g, const std::vector<int32_t>& sequence, bool timeline) {
        const Sequence seq = to_sequence(g, sequence);
        return simulate(g, seq, SimulateOptions{.timeline = timeline});
      },
      py::arg("graph"), py::arg("sequence"), py::arg("timeline") = false);
  m.def(
      "default_schedule", [](const Graph& g) { return node_indices(default_schedule(g)); },
      py::arg("graph"));
  m.def(
      "baseline",
      [](const Graph& g) {
        const Baseline b = baseline(g);
        return py::make_tuple(b.peak_bytes, b.cost);
      },
      py::arg("graph"), "(peak_bytes, cost) of the default schedule, from the simulator.");
  m.def("memory_lower_bound", &memory_lower_bound, py::arg("graph"));
  m.def("cost_lower_bound", &cost_lower_bound, py::arg("graph"));
  m.def("graph_fingerprint", &graph_fingerprint, py::arg("graph"),
        "32 hex digits identifying the graph's nodes, values, sizes and costs (not its name); "
        "plan files record it.");
  m.def(
      "parse_budget",
      [](const Graph& g, const py::object& budget) { return to_budget(g, budget).bytes; },
      py::arg("graph"), py::arg("budget"));
  m.def(
      "budget_bytes",
      [](const py::object& budget, int64_t baseline_peak_bytes) {
        return to_budget(budget, [&] { return baseline_peak_bytes; }).bytes;
      },
      py::arg("budget"), py::arg("baseline_peak_bytes"),
      "A budget (bytes, or text such as \"50%\" of baseline_peak_bytes or \"90MB\") in bytes, "
      "read as the CLI's --budget.");
  m.def("format_bytes", &format_bytes, py::arg("bytes"));
  m.def(
      "better_plan",
      [](int64_t a_peak, double a_cost, int64_t b_peak, double b_cost, int64_t budget_bytes) {
        return better_plan({a_peak, a_cost}, {b_peak, b_cost}, budget_bytes);
      },
      py::arg("a_peak_bytes"), py::arg("a_cost"), py::arg("b_peak_bytes"), py::arg("b_cost"),
      py::arg("budget_bytes"),
      "Whether plan a beats plan b under the budget, by the rule every solver uses: within it "
      "beats over it; within it the cheaper wins, over it the lower peak; ties go to the other "
      "figure.");
  m.attr("DEFAULT_WORK_LIMIT") = kDefaultWorkLimit;
  m.def("sequence_plan_json", &sequence_plan_json, py::arg("graph"), py::arg("sequence"),
        py::arg("budget_bytes"), py::arg("solver"), py::arg("status"),
        "remat-plan JSON text of a sequence no solve returned (the one plan writer).");
  m.def("write_text_file", &write_text_file_atomic, py::arg("path"), py::arg("text"),
        "Writes `text` to `path` as the CLI writes its outputs (a temporary file renamed at the "
        "end: never a partial file).");
  m.def("read_plan", &read_plan_py, py::arg("graph"), py::arg("path"),
        "(node ids, solver, status, text) of a remat-plan file, checked against the graph "
        "(the one plan reader).");
  m.def("backstop_time_limit", &backstop_time_limit, py::arg("work_limit"),
        "The wall-clock backstop (seconds) for a work limit when no time limit is given.");
  m.def(
      "check_limits",
      [](double time_limit, double work_limit) {
        check_time_limit(time_limit);
        check_work_limit(work_limit);
      },
      py::arg("time_limit"), py::arg("work_limit"),
      "The core's range checks of a time limit and a work limit (ValueError naming the range).");
  m.def("solvers", &solver_list, "(name, description) of every registered solver.");
  m.def("solver_rows", &solver_rows,
        "Every registry row as a dict: what it accepts, its parameters and properties.");
  m.def("chain_solve", &chain_solve_py, py::arg("chain"), py::arg("budget"), py::arg("solver"),
        py::arg("time_limit"), py::arg("params"), py::arg("seed") = 1, py::arg("threads") = 1,
        py::arg("progress") = py::none(), py::arg("work_limit") = kDefaultWorkLimit,
        "The judged solve of a chain (a Chain, or remat chain JSON text) under a budget: bytes, or "
        "text such as \"50%\" (of the store-all peak) or \"90MB\".");
  m.def("chain_simulate", &chain_simulate_py, py::arg("chain"), py::arg("ops"),
        "The chain simulator on ops [(name, stage)]; the chain is a Chain or its JSON text.");
  m.def(
      "chain_solvers",
      [] {
        py::list out;
        for (const SolverEntry& e : solver_registry())
          if (e.accepts.chain)
            out.append(py::make_tuple(std::string(e.name), std::string(e.description)));
        return out;
      },
      "(name, description) of every registry row that accepts chains.");
  m.def("load_chain", &read_chain_file, py::arg("path"), "Reads a remat chain JSON file.");
  m.def(
      "save_chain",
      [](const py::object& chain, const std::string& path) {
        write_chain_file(path, chain_arg(chain));
      },
      py::arg("chain"), py::arg("path"),
      "Writes a chain (a Chain, or its JSON text) as a remat chain JSON file.");
  m.def("extract_chain", &extract_chain_py, py::arg("graph"), py::arg("max_stages") = 100);
  m.def("rockmate_blocks", &rockmate_blocks_py, py::arg("graph"),
        "Rockmate's blocks (rk-GB) and the classes of identical blocks.");
  m.def("lower_chain_plan", &lower_chain_py, py::arg("graph"), py::arg("max_stages"),
        py::arg("ops"));
  m.def("solve", &solve_py, py::arg("graph"), py::arg("budget"), py::arg("solver"),
        py::arg("time_limit"), py::arg("seed"), py::arg("threads"), py::arg("params"),
        py::arg("progress") = py::none(), py::arg("start") = py::none(),
        py::arg("work_limit") = kDefaultWorkLimit,
        "The judged solve; `start`: node ids of a plan to start from (rows with accepts_start); "
        "`work_limit`: the deterministic stop in work units, `time_limit` the wall-clock backstop "
        "in seconds.");
}
