#include "milp/milp.h"

#include <fmt/format.h>
#include <signal.h>

#include <CbcEventHandler.hpp>
#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <ClpEventHandler.hpp>
#include <ClpSimplex.hpp>
#include <ClpSolve.hpp>
#include <CoinMessageHandler.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "remat/error.h"
#include "remat/toolkit.h"

namespace remat::milp {
namespace {

// Routes every COIN message line to the callback instead of stdout.
class LogRouter : public CoinMessageHandler {
 public:
  explicit LogRouter(const std::function<void(std::string_view)>& log) : log_(log) {
    setLogLevel(log_ ? 1 : 0);
  }
  int print() override {
    if (log_) log_(messageBuffer());
    return 0;
  }
  CoinMessageHandler* clone() const override { return new LogRouter(*this); }

 private:
  std::function<void(std::string_view)> log_;
};

double finite_or(double v, double big) {
  if (v == kInf) return big;
  if (v == -kInf) return -big;
  return v;
}

// Loads the model into a Clp interface; COIN uses its own infinity. Clp's interrupt handling is
// off: it would take the caller's SIGINT handler while it solves (see SearchStop).
void load(const MilpModel& m, OsiClpSolverInterface& osi, bool integers) {
  ClpSolve solve_options;
  solve_options.setSpecialOption(2, 1);
  osi.setSolveOptions(solve_options);
  const double inf = osi.getInfinity();
  std::vector<double> cl(m.col_lower.size()), cu(m.col_upper.size()), rl(m.row_lower.size()),
      ru(m.row_upper.size());
  for (size_t i = 0; i < cl.size(); ++i) {
    cl[i] = finite_or(m.col_lower[i], inf);
    cu[i] = finite_or(m.col_upper[i], inf);
  }
  for (size_t i = 0; i < rl.size(); ++i) {
    rl[i] = finite_or(m.row_lower[i], inf);
    ru[i] = finite_or(m.row_upper[i], inf);
  }
  const CoinPackedMatrix matrix(false, m.elem_row.data(), m.elem_col.data(), m.elem_value.data(),
                                static_cast<CoinBigIndex>(m.elem_value.size()));
  CoinPackedMatrix sized(matrix);
  sized.setDimensions(m.num_rows(), m.num_columns());
  osi.loadProblem(sized, cl.data(), cu.data(), m.objective.data(), rl.data(), ru.data());
  if (integers)
    for (int32_t j = 0; j < m.num_columns(); ++j)
      if (m.is_integer[static_cast<size_t>(j)]) osi.setInteger(j);
}

// The stops shared by CBC's and Clp's event handlers (COIN clones handlers, so they hold them by
// pointer): the wall clock and the work limit. CBC's own time limit is read only between nodes
// and cut passes; the root LP of a large model alone may run past it, hence the check on every
// simplex iteration too. The work limit counts simplex iterations over every LP of the search
// (heuristics' sub-searches included, their solvers are clones) and ends the search at the first
// CBC event past it: iterations and events do not depend on the machine's speed, so a search
// stopped there gives the same plan on a loaded machine as on an idle one.
// CbcMain0/CbcMain1 parse their arguments through process-wide state: two MILPs solved at once
// (rockmate's per-block options on several threads) interleave their tokens, and CBC then prints
// "No match for ..." to standard output and waits on standard input. One CBC run at a time.
std::mutex& cbc_main_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Clp's solves and CbcMain1 put their own SIGINT handlers in place of the caller's unless told not
// to (both are told): a Ctrl-C then stopped only the LP or sub-search running, and the CLI's
// interrupt was lost (the run went on to its time limit). The
// handlers also put the caller's handler back should anything else have replaced it.
struct SearchStop {
  SearchStop(double seconds, int64_t iteration_limit)
      : deadline(seconds),
        lp_deadline(seconds * 1.03 + 0.05),
        iteration_limit(iteration_limit),
        lp_iteration_limit(iteration_limit + iteration_limit / 4) {
    sigaction(SIGINT, nullptr, &caller_sigint);
  }
  void restore_caller_sigint() const {
    struct sigaction now {};
    sigaction(SIGINT, nullptr, &now);
    if (now.sa_handler != caller_sigint.sa_handler) sigaction(SIGINT, &caller_sigint, nullptr);
  }
  bool out_of_work() const { return iteration_limit > 0 && iterations >= iteration_limit; }
  // A single LP that would run far past the work limit is ended too (as past the deadline).
  bool lp_out_of_work() const { return iteration_limit > 0 && iterations >= lp_iteration_limit; }

  Deadline deadline;  // also expires on the CLI's SIGINT (remat/interrupt.h)
  // A little later: CBC normally stops between nodes first and keeps its bound; this one ends an
  // LP that alone would overrun.
  Deadline lp_deadline;
  int64_t iteration_limit = 0;  // 0: none
  int64_t lp_iteration_limit = 0;
  bool lp_aborted = false;
  int64_t iterations = 0;
  struct sigaction caller_sigint {};
};

// Ends the search once the deadline passed or the work is spent, the way CBC's own Ctrl-C handler
// does (sayEventHappened: CBC stops at its next check, as on its time limit). Answering `stop` from
// the handler, or CBC's -maxNodes, made CbcMain1 2.10.8 crash in its final resolve when the stop
// came inside a heuristic's small search (the feasibility pump's mini branch and bound, which ran
// for whole time limits on generated graphs of 60 nodes). CBC's own limit counts elapsed time
// ("-timeMode elapsed") but knows nothing of the CLI's interrupt, hence this handler.
class CbcStop : public CbcEventHandler {
 public:
  explicit CbcStop(std::shared_ptr<SearchStop> stop) : stop_(std::move(stop)) {}
  CbcAction event(CbcEvent) override {
    stop_->restore_caller_sigint();
    if (stop_->deadline.expired() || stop_->out_of_work())
      const_cast<CbcModel*>(getModel())->sayEventHappened();
    return noAction;
  }
  CbcEventHandler* clone() const override { return new CbcStop(*this); }

 private:
  std::shared_ptr<SearchStop> stop_;
};

// Stops a simplex run past the deadline. Inside CBC an aborted LP makes the search bound
// unreliable, so `lp_aborted` tells the caller to discard it.
class ClpStop : public ClpEventHandler {
 public:
  explicit ClpStop(std::shared_ptr<SearchStop> stop) : stop_(std::move(stop)) {}
  int event(Event which) override {
    if (which != endOfIteration) return -1;
    if (++stop_->iterations % 64 == 1) stop_->restore_caller_sigint();
    if (!stop_->lp_deadline.expired() && !stop_->lp_out_of_work()) return -1;
    stop_->lp_aborted = true;
    return 0;
  }
  ClpEventHandler* clone() const override { return new ClpStop(*this); }

 private:
  std::shared_ptr<SearchStop> stop_;
};

std::string column_name(int32_t j) { return fmt::format("x{}", j); }

int no_callback(CbcModel*, int) { return 0; }

// Clp's presolve and CBC's set-up see no event: a run asked after the deadline or an interrupt
// is not started (on a few hundred nodes they alone take about a second).
std::optional<MilpResult> too_late(const SearchStop& stop) {
  if (!stop.deadline.expired()) return std::nullopt;
  MilpResult result;
  result.stopped_on_time = true;
  return result;
}

}  // namespace

double units_per_iteration(const MilpModel& model) {
  const double size =
      static_cast<double>(model.num_rows() + model.num_columns() + model.num_nonzeros());
  return (1 + size / kSimplexSizeScale) / kSimplexIterationsPerUnit;
}

int64_t iterations_for(double work_units, const MilpModel& model) {
  return work_ops(work_units, 1 / units_per_iteration(model));
}

int32_t MilpModel::add_column(double lower, double upper, double cost, bool integer) {
  // Clp asserts (aborts the process) on an objective coefficient of 1e25 or more: callers scale.
  REMAT_CHECK(std::abs(cost) < 1e20, fmt::format("objective coefficient {} out of range", cost));
  col_lower.push_back(lower);
  col_upper.push_back(upper);
  objective.push_back(cost);
  is_integer.push_back(integer ? 1 : 0);
  return num_columns() - 1;
}

int32_t MilpModel::add_row(double lower, double upper, std::span<const Term> terms) {
  const int32_t row = num_rows();
  row_lower.push_back(lower);
  row_upper.push_back(upper);
  for (const Term& t : terms) {
    if (t.coefficient == 0) continue;
    elem_row.push_back(row);
    elem_col.push_back(t.column);
    elem_value.push_back(t.coefficient);
  }
  return row;
}

double MilpModel::max_violation(std::span<const double> x) const {
  double worst = 0;
  for (int32_t j = 0; j < num_columns(); ++j) {
    const auto jj = static_cast<size_t>(j);
    worst = std::max({worst, col_lower[jj] - x[jj], x[jj] - col_upper[jj]});
    if (is_integer[jj]) worst = std::max(worst, std::abs(x[jj] - std::round(x[jj])));
  }
  std::vector<double> activity(row_lower.size(), 0.0);
  for (size_t e = 0; e < elem_value.size(); ++e)
    activity[static_cast<size_t>(elem_row[e])] +=
        elem_value[e] * x[static_cast<size_t>(elem_col[e])];
  for (size_t i = 0; i < activity.size(); ++i)
    worst = std::max({worst, row_lower[i] - activity[i], activity[i] - row_upper[i]});
  return worst;
}

double MilpModel::objective_value(std::span<const double> x) const {
  double sum = 0;
  for (size_t j = 0; j < objective.size(); ++j) sum += objective[j] * x[j];
  return sum;
}

MilpResult solve_milp(const MilpModel& model, const MilpOptions& options) {
  const auto stop = std::make_shared<SearchStop>(options.time_limit_s, options.iteration_limit);
  if (auto late = too_late(*stop)) return *late;
  LogRouter router(options.log);
  OsiClpSolverInterface osi;
  osi.passInMessageHandler(&router);
  load(model, osi, true);
  // CbcModel clones the solver, and with it this handler: it ends a simplex run past the limit.
  ClpStop clp_stop(stop);
  osi.getModelPtr()->passInEventHandler(&clp_stop);
  const bool has_start = !options.start.empty();
  if (has_start)
    for (int32_t j = 0; j < model.num_columns(); ++j) osi.setColName(j, column_name(j));
  CbcModel cbc(osi);
  cbc.passInMessageHandler(&router);
  CbcStop cbc_stop(stop);
  cbc.passInEventHandler(&cbc_stop);
  cbc.setUseElapsedTime(true);
  CbcSolverUsefulData data;
  data.noPrinting_ = !options.log;
  const std::lock_guard cbc_main_lock(cbc_main_mutex());
  CbcMain0(cbc, data);
  // CbcMain1 would install its own SIGINT handler in place of the CLI's, and stop only the model
  // it knows then (a MIP-start or heuristic sub-model: the run went on to its full time limit).
  data.useSignalHandler_ = false;
  if (has_start) {
    std::vector<std::pair<std::string, double>> start;
    start.reserve(options.start.size());
    for (int32_t j = 0; j < model.num_columns(); ++j)
      start.emplace_back(column_name(j), options.start[static_cast<size_t>(j)]);
    cbc.setMIPStart(start);
  }
  // Default CBC preprocessing wrongly reports these models infeasible: keep it off. No
  // "-threads": Debian's CBC is built without threads (the parser takes the count for a command);
  // one thread is also what keeps the search deterministic.
  std::vector<std::string> args = {"remat",
                                   "-log",
                                   options.log ? "1" : "0",
                                   "-preprocess",
                                   "off",
                                   "-timeMode",
                                   "elapsed",
                                   "-sec",
                                   fmt::format("{}", std::max(options.time_limit_s, 0.01)),
                                   "-randomCbcSeed",
                                   fmt::format("{}", options.seed % 2000000000 + 1)};
  if (options.relative_gap > 0)
    args.insert(args.end(), {"-ratio", fmt::format("{}", options.relative_gap)});
  args.insert(args.end(), {"-solve", "-quit"});
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  CbcMain1(static_cast<int>(argv.size()), argv.data(), cbc, no_callback, data);

  MilpResult result;
  result.nodes = cbc.getNodeCount();
  result.stopped_on_time = stop->deadline.expired();
  result.stopped_on_iterations = !result.stopped_on_time && stop->out_of_work();
  result.iterations = stop->iterations;
  // A proof needs every LP of the search solved: after an aborted one, neither the bound nor an
  // optimality or infeasibility claim is trusted.
  const bool trusted = !stop->lp_aborted;
  result.bound = trusted ? cbc.getBestPossibleObjValue() : -kInf;
  if (cbc.bestSolution() != nullptr) {
    result.x.assign(cbc.bestSolution(), cbc.bestSolution() + model.num_columns());
    result.objective = model.objective_value(result.x);
    result.status = trusted && cbc.isProvenOptimal() ? MilpStatus::kOptimal : MilpStatus::kFeasible;
    if (result.status == MilpStatus::kOptimal) result.bound = result.objective;
    result.bound = std::min(result.bound, result.objective);
  } else if (trusted && cbc.isProvenInfeasible()) {
    result.status = MilpStatus::kInfeasible;
  }
  return result;
}

MilpResult solve_lp(const MilpModel& model, const MilpOptions& options) {
  // An LP is one simplex run: its limit is the point where the run is ended.
  const auto stop = std::make_shared<SearchStop>(options.time_limit_s, options.iteration_limit);
  stop->lp_iteration_limit = options.iteration_limit;
  if (auto late = too_late(*stop)) return *late;
  LogRouter router(options.log);
  OsiClpSolverInterface osi;
  osi.passInMessageHandler(&router);
  load(model, osi, false);
  ClpStop clp_stop(stop);
  osi.getModelPtr()->passInEventHandler(&clp_stop);
  osi.getModelPtr()->setMaximumWallSeconds(options.time_limit_s);
  osi.getModelPtr()->setRandomSeed(1234567);
  osi.initialSolve();
  MilpResult result;
  result.iterations = stop->iterations;
  result.stopped_on_iterations =
      stop->lp_aborted && stop->lp_out_of_work() && !stop->lp_deadline.expired();
  result.stopped_on_time =
      !result.stopped_on_iterations && (stop->lp_aborted || stop->deadline.expired());
  if (osi.isProvenOptimal() && !stop->lp_aborted) {
    result.status = MilpStatus::kOptimal;
    result.x.assign(osi.getColSolution(), osi.getColSolution() + model.num_columns());
    result.objective = osi.getObjValue();
    result.bound = result.objective;
  } else if (osi.isProvenPrimalInfeasible()) {
    result.status = MilpStatus::kInfeasible;
  }
  return result;
}

void write_mps(const MilpModel& model, const std::string& path) {
  OsiClpSolverInterface osi;
  LogRouter silent(nullptr);
  osi.passInMessageHandler(&silent);
  load(model, osi, true);
  // Clp's writer does not compress (Osi's native writer appends .gz); format 1: full precision.
  const int errors = osi.getModelPtr()->writeMps(path.c_str(), 1);
  if (errors != 0) throw InputError(fmt::format("cannot write the MPS file '{}'", path));
}

}  // namespace remat::milp
