// incumbent.h — a plan (a sequence of node positions) as an incumbent of the retention-interval
// model: the copies' presences and start events, the ends that the simulator's liveness gives,
// and the plan's peak and cost in model units. This is how a warm start from another solver (or
// a user's plan) enters the search; it is Gecode-free like instance.h.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "moccasin/instance.h"

namespace remat::moccasin {

// How many times each of the `num_nodes` positions runs in `sequence`.
std::vector<int32_t> computations(int32_t num_nodes, std::span<const int32_t> sequence);

// The sequence in the form the staged events can hold, when its first computations follow the
// node order: between two first computations, the recomputations sorted by node and each node
// kept once (the first time). Still a valid plan (a recomputation's inputs come before it or
// earlier), possibly with another peak. Other sequences come back unchanged.
std::vector<int32_t> staged_form(int32_t num_nodes, std::span<const int32_t> sequence);

// The sequence as a model solution, or nullopt with `why` set when the model cannot express it.
// Staged events (fixed order): the first computations must follow the node order, each stage's
// recomputations must be in node order with at most one per node, and no recomputation may
// follow the last node's first computation (there is no later stage). Free order: any sequence.
// Either way each node may run at most its `copies` times. The solution's objective is left 0;
// its peak is the model's (scaled units; inputs excluded, as the capacity).
std::optional<Solution> to_solution(const Instance& instance, std::span<const int32_t> sequence,
                                    std::string& why);

// The model's cost (Σ weights of present copies) and peak of a solution.
int64_t model_cost(const Instance& instance, const Solution& solution);

}  // namespace remat::moccasin
