"""MOCCASIN against the Checkmate MILP (issue 12's cross-check): in the fixed order with C_v large
enough, the two models optimise over the same plans, so wherever both prove optimality their
optima are equal. Needs CBC (checkmate) and Gecode (moccasin)."""
import pytest

import remat
from test_checkmate import random_graph

pytestmark = pytest.mark.skipif(
    not {"checkmate", "moccasin"} <= set(remat.solvers()), reason="needs CBC and Gecode")


def test_proven_optima_equal_the_checkmate_milps():
    compared = 0
    for seed in (1, 4, 5):
        graph = random_graph(seed)  # 12 nodes
        peak = remat.baseline(graph)[0]
        lower = remat.memory_lower_bound(graph)
        for fraction in (0.9, 0.8):
            budget = max(int(fraction * peak), lower)
            milp = remat.solve(graph, budget, "checkmate", time_limit=10)
            cp = remat.solve(graph, budget, "moccasin", time_limit=10, c="12")
            if cp.feasible:
                assert cp.peak_bytes <= budget
            if milp.status == "optimal" and cp.status == "optimal":
                assert cp.cost == pytest.approx(milp.cost, rel=1e-9), (seed, fraction)
                compared += 1
    # Measured: both prove optimality at 5 of these 6 points (seed 1 at 80 %: moccasin finds the
    # optimum without proving it in 10 s).
    assert compared >= 3
