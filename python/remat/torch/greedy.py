"""remat.torch.greedy: a greedy recomputation plan for a joint training graph.

    sequence, evaluation = greedy_plan(graph, remat.default_schedule(graph), budget, start)

From the default schedule, each round recomputes in the backward the forward step that lowers
the simulated peak most per unit of cost, just before the first backward step reading what it
makes (with the forward steps it needs whose values the backward would not otherwise keep), until
the peak fits the budget or no step lowers it. It is PyTorch's activation-memory-budget knapsack
in remat's model: cheap steps whose values are large go first. A graph solver's annealing may
miss such a plan where it needs several steps moved at once (a matmul and the softmax reading
it); partition.partition keeps the best of the solver's plan, this one and FastSA started from
this one. Every figure is the simulator's, and a non-recomputable node (a random draw) never
runs twice.
"""

import remat

# How many forward steps one recomputation may chain back through.
MAX_CHAIN = 4


def greedy_plan(graph, sequence, budget, backward_start):
    """(sequence, its evaluation): `sequence` (a valid schedule of `graph` whose backward starts
    after node `backward_start`) with recomputations added greedily until its peak is at most
    `budget` bytes or no recomputation lowers it."""
    plan = _Recomputations(graph, sequence, backward_start)
    evaluation = remat.simulate(graph, plan.sequence)
    applied = set()
    while evaluation.peak_bytes > budget:
        best = None
        for step in plan.candidates:
            if step in applied:
                continue
            trial = plan.with_recomputation(step)
            tried = remat.simulate(graph, trial)
            if not tried.valid or tried.peak_bytes >= evaluation.peak_bytes:
                continue
            gain = (evaluation.peak_bytes - tried.peak_bytes) / max(tried.cost - evaluation.cost,
                                                                   1.0)
            if best is None or gain > best[0]:
                best = (gain, step, trial, tried)
        if best is None:
            break
        _, step, plan.sequence, evaluation = best
        applied.add(step)
    return plan.sequence, evaluation


class _Recomputations:
    """A schedule and the forward steps whose outputs the backward reads (the candidates)."""

    def __init__(self, graph, sequence, backward_start):
        self.nodes = [graph.node(i) for i in range(graph.num_nodes)]
        self.producer = {v: i for i, node in enumerate(self.nodes) for v in node["outputs"]}
        self.sequence = list(sequence)
        self.backward_start = backward_start
        start = self.sequence.index(backward_start)
        forward = self.sequence[:start]
        self.forward = set(forward)
        self.read_in_backward = {v for i in self.sequence[start + 1:]
                                 for v in self.nodes[i]["inputs"]}
        self.candidates = [i for i in dict.fromkeys(forward) if self.nodes[i]["recomputable"]
                           and any(v in self.read_in_backward for v in self.nodes[i]["outputs"])]

    def with_recomputation(self, step):
        """The sequence with `step` run again just before the first backward step reading one of
        its outputs, after the forward steps it needs (MAX_CHAIN deep) whose values the backward
        would not otherwise read."""
        made = set(self.nodes[step]["outputs"])
        start = self.sequence.index(self.backward_start)
        at = next((k for k in range(start + 1, len(self.sequence))
                   if made & set(self.nodes[self.sequence[k]]["inputs"])), None)
        if at is None:
            return None
        steps = []
        self._add_with_inputs(step, steps, MAX_CHAIN)
        return self.sequence[:at] + steps + self.sequence[at:]

    def _add_with_inputs(self, step, steps, depth):
        for v in self.nodes[step]["inputs"]:
            p = self.producer.get(v)
            if p is None or p in steps or p not in self.forward or depth == 0 \
                    or v in self.read_in_backward or not self.nodes[p]["recomputable"]:
                continue  # read where it is: its first copy lives until here
            self._add_with_inputs(p, steps, depth - 1)
        steps.append(step)
