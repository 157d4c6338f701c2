// The shared minimum-cut library (src/shared/min_cut/min_cut.h): the source side of a minimum cut
// on real capacities, with infinite edges that no cut crosses, and the int64 layer below it.
#include "min_cut/min_cut.h"

#include <gtest/gtest.h>

#include <vector>

#include "remat/error.h"

namespace remat::min_cut {
namespace {

constexpr double kInfinite = MinCutNetwork::kInfinite;

// s -> a is infinite, so a stays with the source; of the cuts left, {s, a} (1.5 + 0.25 + 0.75 =
// 2.5) is cheaper than {s, a, b} (0.75 + 3.0 = 3.75).
TEST(MinCutNetwork, FindsTheCheapestCutThatCrossesNoInfiniteEdge) {
  enum : int32_t { s, a, b, t };
  MinCutNetwork net(4);
  net.add_edge(s, a, kInfinite);
  net.add_edge(s, b, 1.5);
  net.add_edge(a, b, 0.25);
  net.add_edge(a, t, 0.75);
  net.add_edge(b, t, 3.0);
  EXPECT_EQ(net.source_side(s, t), (std::vector<bool>{true, true, false, false}));
}

// Two routes whose edges differ in the seventh significant digit: the cut takes the cheaper edge
// of each (a -> t, s -> b), so real capacities are not rounded to a few digits.
TEST(MinCutNetwork, TellsApartRealCapacitiesThatDifferInTheSeventhDigit) {
  enum : int32_t { s, a, b, t };
  MinCutNetwork net(4);
  net.add_edge(s, a, 1.000001);
  net.add_edge(a, t, 1.0);
  net.add_edge(s, b, 2.0);
  net.add_edge(b, t, 2.000002);
  EXPECT_EQ(net.source_side(s, t), (std::vector<bool>{true, true, false, false}));
}

// s -> a -> t with equal capacities has two minimum cuts; the smaller source side is the one
// returned, whatever maximum flow was found. Parallel edges add up (0.5 + 0.5 against 1).
TEST(MinCutNetwork, ReturnsTheSmallestSourceSideOnTies) {
  enum : int32_t { s, a, t };
  MinCutNetwork net(3);
  net.add_edge(s, a, 0.5);
  net.add_edge(s, a, 0.5);
  net.add_edge(a, t, 1.0);
  EXPECT_EQ(net.source_side(s, t), (std::vector<bool>{true, false, false}));
}

// A tie on int64 capacities: with either algorithm, both edges are saturated, so the source
// reaches only itself (the smallest source side, {s}) and only t reaches the sink (the smallest
// sink side, {t}); a is on the sink side of one minimum cut and the source side of the other.
TEST(IntegerFlowNetwork, GivesBothEndsOfATieWithEitherAlgorithm) {
  enum : int32_t { s, a, t };
  for (MaxFlowAlgorithm algorithm :
       {MaxFlowAlgorithm::kBoykovKolmogorov, MaxFlowAlgorithm::kPushRelabel}) {
    IntegerFlowNetwork net(3);
    net.add_edge(s, a, 7);
    net.add_edge(a, t, 7);
    EXPECT_EQ(net.max_flow(s, t, algorithm), 7);
    EXPECT_EQ(net.reached_from(s), (std::vector<bool>{true, false, false}));
    EXPECT_EQ(net.reaching(t), (std::vector<bool>{false, false, true}));
  }
}

TEST(MinCutNetwork, RejectsANetworkWhoseEveryCutIsInfinite) {
  MinCutNetwork net(3);
  net.add_edge(0, 1, kInfinite);
  net.add_edge(1, 2, kInfinite);
  net.add_edge(0, 2, 4.0);
  EXPECT_THROW(net.source_side(0, 2), InternalError);
}

TEST(MinCutNetwork, RejectsANegativeCapacity) {
  MinCutNetwork net(2);
  EXPECT_THROW(net.add_edge(0, 1, -1.0), InternalError);
}

}  // namespace
}  // namespace remat::min_cut
