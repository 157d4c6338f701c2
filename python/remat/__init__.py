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
    Chain,
    ChainSizes,
    ChainStage,
    Evaluation,
    Graph,
    SolveResult,
    baseline,
    cost_lower_bound,
    default_schedule,
    format_bytes,
    graph_fingerprint,
    load,
    memory_lower_bound,
    save,
    simulate,
)
from remat import _remat  # noqa: E402

__all__ = [
    "Chain",
    "ChainSizes",
    "ChainStage",
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
    "solve_chain",
    "solvers",
]


def solvers():
    """Names of the registered solvers, in registry order."""
    return [name for name, _ in _remat.solvers()]


_MAX_TOTAL_BYTES = 1 << 62  # no graph holds more bytes (kMaxTotalBytes in remat/graph.h)


def parse_budget(graph, budget, *, check_lower_bound=False):
    """A budget in bytes. `budget` is int bytes, a float fraction of the baseline peak in (0, 1]
    (0.5 = 50 %), text ("50%", "90MB", "1.5GiB") or "min" (the memory lower bound: ask for the
    least-memory plan). ValueError when out of range, and with check_lower_bound when below the
    memory lower bound (the message names the bound, as the CLI does)."""
    base = _remat.baseline(graph)[0]
    if isinstance(budget, bool) or not isinstance(budget, (int, float, str)):
        raise TypeError(f"budget must be int bytes, a float fraction, text such as \"50%\" or "
                        f"\"90MB\", or \"min\" (got {type(budget).__name__})")
    if isinstance(budget, int):
        if not 0 < budget <= _MAX_TOTAL_BYTES:
            raise ValueError(f"budget must be positive bytes up to 2^62 (got {budget})")
        budget_bytes = budget
    elif isinstance(budget, float):
        if not 0.0 < budget <= 1.0:
            raise ValueError(f"a float budget is a fraction of the baseline peak in (0, 1] "
                             f"(0.5 = 50 %); got {budget!r} (use text like \"150%\" or "
                             f"\"90MB\" for other budgets)")
        budget_bytes = int(budget * base)
    elif budget.strip().lower() == "min":
        budget_bytes = _remat.memory_lower_bound(graph)
    else:
        budget_bytes = _remat.parse_budget(graph, budget)
    if check_lower_bound:
        lower = _remat.memory_lower_bound(graph)
        if budget_bytes < lower:
            raise ValueError(
                f"budget {format_bytes(budget_bytes)} ({_percent(budget_bytes, base):.1f} % of "
                f"the baseline peak {format_bytes(base)}) is below the memory lower bound "
                f"{format_bytes(lower)} ({_percent(lower, base):.1f} %) of {graph.name}: no plan "
                f"can fit; budget=\"min\" asks for the least-memory plan")
    return budget_bytes


def _percent(part, whole):
    return 100.0 * part / whole if whole else 0.0


def solve(graph, budget, solver="none", *, work_limit=None, time_limit=None, seed=1, threads=1,
          progress=None, **params):
    """Runs `solver` on `graph` under `budget` (see parse_budget: bytes, a float fraction, text
    like "50%" of the baseline peak or "90MB", or "min").

    The search stops on `work_limit` (work units, about a CPU second each on the reference machine;
    default 60; docs/limits.md), so the same graph, options and seed give the same plan on a loaded
    machine as on an idle one; `time_limit` (seconds) is a wall-clock backstop, by default ten
    times the work limit plus 10 s. The result's stop_reason says which ended the search.

    Solver-specific parameters go as keyword arguments (converted to text for the core, which
    rejects unknown keys). `progress(stage, fraction, iterations, best_objective)` is called as
    the solver reports (fraction -1 when unknown, best_objective -1 before any); a callback taking
    six arguments also gets `best_peak_bytes, best_cost` of the best plan so far (-1 when the
    solver does not track them; FastSA does). An exception it raises is re-raised after the
    solver returns. The result's peak and cost come from the simulator.
    """
    work_limit, time_limit, seed, threads = _solve_settings(work_limit, time_limit, seed, threads)
    return _remat.solve(graph, parse_budget(graph, budget), solver, time_limit, seed, threads,
                        params, _progress_adapter(progress), work_limit=work_limit)


_MAX_THREADS = 256  # kMaxThreads in remat/solver.h


def _solve_settings(work_limit, time_limit, seed=1, threads=1):
    """(work_limit, time_limit, seed, threads) checked by name: TypeError for a wrong type,
    ValueError for a value out of range (the limits by the core's own checks), before anything
    reaches a solver. None limits take the defaults."""
    def number(name, x, kinds):
        if isinstance(x, bool) or not isinstance(x, kinds):
            raise TypeError(f"{name} must be {' or '.join(k.__name__ for k in kinds)} "
                            f"(got {type(x).__name__})")
        return x
    work_limit = (_remat.DEFAULT_WORK_LIMIT if work_limit is None
                  else float(number("work_limit", work_limit, (int, float))))
    time_limit = (_remat.backstop_time_limit(work_limit) if time_limit is None
                  else float(number("time_limit", time_limit, (int, float))))
    _remat.check_limits(time_limit, work_limit)
    seed = number("seed", seed, (int,))
    if not 0 <= seed < 1 << 64:
        raise ValueError(f"seed must be in [0, 2^64) (got {seed})")
    threads = number("threads", threads, (int,))
    if not 1 <= threads <= _MAX_THREADS:
        raise ValueError(f"threads must be in [1, {_MAX_THREADS}] (got {threads})")
    return work_limit, time_limit, seed, threads


def _progress_adapter(progress):
    """The core reports six figures; a four-argument callback gets the first four."""
    if progress is None:
        return None
    import inspect

    try:
        parameters = inspect.signature(progress).parameters.values()
    except (TypeError, ValueError):
        return progress
    if any(p.kind == p.VAR_POSITIONAL for p in parameters) or len(parameters) >= 6:
        return progress
    return lambda stage, fraction, iterations, best, _peak, _cost: progress(
        stage, fraction, iterations, best)


def solve_chain(chain, budget, solver="rotor", *, work_limit=None, time_limit=None, **params):
    """Runs a solver whose registry row takes chains (auto, none, rotor, revolve, sequential,
    store-all) through the judged solve, on a `remat.Chain` (from `remat.Chain(...)`,
    `remat.Chain.from_json(text)`, `remat._remat.load_chain(path)`,
    `_remat.extract_chain(graph)["chain"]` or `remat.torch.Checkpointable.chain`) or its remat
    chain JSON text, under `budget`: bytes, or text read as the CLI's --budget ("80%" of the chain's
    store-all peak, "90MB"). Returns a dict:
    ops [(name, stage)], notation, status, feasible, peak_bytes and cost (= makespan, also under
    that name; from the chain simulator), timeline, store-all figures, cost_lower_bound, counters
    and lists."""
    if isinstance(chain, str):
        chain = Chain.from_json(chain)
    if not isinstance(chain, Chain):
        raise ValueError(f"solve_chain: chain must be a remat.Chain or remat chain JSON text, "
                         f"got {type(chain).__name__}")
    work_limit, time_limit, _, _ = _solve_settings(work_limit, time_limit)
    return _remat.chain_solve(chain, budget, solver, time_limit, params,
                              work_limit=work_limit)
