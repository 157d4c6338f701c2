// No input ends the process from inside the library: a failed internal check throws InternalError,
// the judged solve turns whatever a solver throws into an error naming the solver and the graph,
// messages stay on one line, and an InterruptPoll stops a solve on its thread.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "remat/error.h"
#include "remat/generate.h"
#include "remat/interrupt.h"
#include "remat/registry.h"
#include "remat/solver.h"
#include "testing/testing.h"

namespace remat {
namespace {

std::string internal_error_of(const std::function<void()>& action) {
  return testing::error_of<InternalError>(action);
}

TEST(InternalErrors, AFailedCheckThrowsInsteadOfAborting) {
  const std::string message =
      internal_error_of([] { REMAT_CHECK(1 + 1 == 3, "arithmetic is broken"); });
  EXPECT_NE(message.find("check '1 + 1 == 3' failed: arithmetic is broken"), std::string::npos)
      << message;
}

// A solver that fails the way a bug does: a failed check, a library's exception, or an object
// that is not even a std::exception (CoinError is one).
class FailingSolver : public Solver {
 public:
  explicit FailingSolver(int how) : how_(how) {}
  Plan solve(const Graph&, const SolveOptions&) override {
    if (how_ == 0) REMAT_CHECK(false, "the solver's invariant");
    if (how_ == 1) throw std::out_of_range("vector::at");
    throw 42;
  }

 private:
  int how_;
};

// The row's factory is a plain function pointer: it reads how to fail from here.
int current_how = 0;

TEST(InternalErrors, TheJudgedSolveNamesTheSolverAndTheGraphWhateverWasThrown) {
  const Graph g = generate_random_layered({.num_nodes = 20, .seed = 2});
  SolveOptions options;
  options.budget = parse_budget("100%", baseline(g).peak_bytes);
  for (int how : {0, 1, 2}) {
    SCOPED_TRACE(how);
    const SolverEntry row = {.name = "failing",
                             .description = "fails like a bug",
                             .make = [](const SolverDirectory&) -> std::unique_ptr<Solver> {
                               return std::make_unique<FailingSolver>(current_how);
                             }};
    current_how = how;
    const std::string message = internal_error_of([&] { (void)solve(g, row, options); });
    EXPECT_NE(message.find("solver 'failing' on graph 'random_layered_n20_s2'"), std::string::npos)
        << message;
  }
}

TEST(InternalErrors, AGraphWithoutOutputsIsRefusedByTheJudge) {
  GraphSpec spec;
  spec.name = "no outputs";
  spec.values = {{.name = "a", .size_bytes = 8}, {.name = "b", .size_bytes = 8}};
  spec.nodes = {{.name = "f", .cost = 1, .outputs = {ValueId{0}}},
                {.name = "g", .cost = 1, .inputs = {ValueId{0}}, .outputs = {ValueId{1}}}};
  const Graph g = Graph::build(std::move(spec), "test");
  SolveOptions options;
  options.budget = Budget{16};
  for (const char* solver : {"auto", "fastsa", "none"}) {
    SCOPED_TRACE(solver);
    const std::string message = testing::input_error_of([&] { (void)solve(g, solver, options); });
    EXPECT_NE(message.find("graph 'no outputs' has no outputs"), std::string::npos) << message;
  }
}

TEST(Messages, NamesAreEscapedOntoOneLineAndCutAtACharacter) {
  EXPECT_EQ(shorten("a\nremat: error: forged"), "a\\nremat: error: forged");
  EXPECT_EQ(shorten("red\x1b[31m bell\a del\x7f"), "red\\x1b[31m bell\\x07 del\\x7f");
  EXPECT_EQ(shorten("csi\xc2\x9b"
                    "31m"),
            "csi\\u009b31m");                                                  // C1 control
  EXPECT_EQ(shorten("bad \xff byte"), "bad \\xff byte");                       // not UTF-8
  EXPECT_EQ(shorten("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");  // kept as is
  // Cut at 4 bytes, inside the second byte of "é": the whole character goes.
  EXPECT_EQ(shorten("caf\xc3\xa9!", 4), "caf... (6 bytes)");
}

// Polls `fire_after` times false, then true.
struct CountingPoll {
  int calls = 0;
  int fire_after = 0;
  static bool poll(void* self) noexcept {
    auto* p = static_cast<CountingPoll*>(self);
    return ++p->calls > p->fire_after;
  }
};

TEST(InterruptPoll, StopsASolveOnItsThreadAndClearsTheFlagAfterwards) {
  const Graph g = generate_random_layered({.num_nodes = 200, .seed = 3});
  SolveOptions options;
  options.budget = parse_budget("80%", baseline(g).peak_bytes);
  options.time_limit_s = 60;
  CountingPoll counter{.fire_after = 5};
  const auto start = std::chrono::steady_clock::now();
  SolveResult r;
  {
    const InterruptPoll poll(&CountingPoll::poll, &counter);
    r = solve(g, "fastsa", options);
    EXPECT_TRUE(poll.fired());
    EXPECT_TRUE(interrupt_requested());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0);  // the 60 s limit did not run out
  EXPECT_TRUE(r.eval.valid);
  EXPECT_FALSE(interrupt_requested());
  // Polled no more often than every kInterruptPollInterval: six polls take >= 100 ms.
  EXPECT_EQ(counter.calls, 6);
  EXPECT_GE(seconds, 0.1);
}

}  // namespace
}  // namespace remat
