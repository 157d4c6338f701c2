"""remat: plan and run rematerialization (activation recomputation) for training graphs.

The core (graph model, simulator, solvers, file formats) is the C++ extension ``remat._remat``;
this module re-exports it with Python conveniences. Every peak and cost here comes from the
simulator, never from a solver's own estimate.

    import remat
    g = remat.Graph.build("toy", values=[{"name": "x", "size": 64}, ...], nodes=[...])
    r = remat.solve(g, "50%", solver="none")      # budget: bytes or text ("50%", "90MB")
    assert remat.simulate(g, r.sequence).peak_bytes == r.peak_bytes

Core input errors (bad graph, unknown solver or parameter, bad budget) raise ValueError with the
core's message.
"""

# The extension is built into build/python/remat/ while the pure-Python files live in
# python/remat/; with both folders on sys.path the package spans the two.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from remat._remat import (  # noqa: E402
    Evaluation,
    Graph,
    SolveResult,
    baseline,
    cost_lower_bound,
    default_schedule,
    format_bytes,
    load,
    memory_lower_bound,
    parse_budget,
    save,
    simulate,
)
from remat import _remat  # noqa: E402

__all__ = [
    "Evaluation",
    "Graph",
    "SolveResult",
    "baseline",
    "cost_lower_bound",
    "default_schedule",
    "format_bytes",
    "load",
    "memory_lower_bound",
    "parse_budget",
    "save",
    "simulate",
    "solve",
    "solvers",
]


def solvers():
    """Names of the registered solvers, in registry order."""
    return [name for name, _ in _remat.solvers()]


def solve(graph, budget, solver="none", *, time_limit=60.0, seed=1, threads=1, progress=None,
          **params):
    """Runs `solver` on `graph` under `budget` (bytes, or text like "50%" of the baseline peak).

    Solver-specific parameters go as keyword arguments (converted to text for the core, which
    rejects unknown keys). `progress(stage, fraction, iterations, best_objective)` is called as
    the solver reports (fraction -1 when unknown); an exception it raises is re-raised after the
    solver returns. The result's peak and cost come from the simulator.
    """
    return _remat.solve(graph, budget, solver, float(time_limit), int(seed), int(threads), params,
                        progress)
