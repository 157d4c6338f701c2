"""The bound core: graphs from dicts, simulate, solve, load/save, errors as ValueError."""

import os

import pytest

import remat

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "rl100.json")

VALUES = [{"name": "x", "size": 64}, {"name": "a", "size": 32}, {"name": "b", "size": 16},
          {"name": "y", "size": 8, "output": True}]
NODES = [{"name": "f", "cost": 1, "inputs": ["x"], "outputs": ["a"]},
         {"name": "g", "cost": 2, "inputs": ["a"], "outputs": ["b"]},
         {"name": "h", "cost": 4, "inputs": ["a", "b"], "outputs": ["y"]}]


def chain():
    return remat.Graph.build("chain", VALUES, NODES)


def test_simulate_by_hand():
    g = chain()
    # Step h holds x (input), a, b and y: 64 + 32 + 16 + 8.
    e = remat.simulate(g, [0, 1, 2], timeline=True)
    assert e.valid and e.peak_bytes == 120 and e.cost == 7
    assert e.timeline == [96, 112, 120]
    assert remat.baseline(g) == (120, 7.0)
    bad = remat.simulate(g, [1, 0, 2])
    assert not bad.valid and "reads value 1 ('a')" in bad.error


def test_solve_none_is_the_default_schedule():
    g = chain()
    r = remat.solve(g, "100%", "none")
    assert r.sequence == [0, 1, 2] and r.peak_bytes == 120 and r.feasible
    assert remat.solve(g, 120, "none").budget_bytes == 120
    assert "none" in remat.solvers()


def test_core_errors_arrive_as_value_error_with_the_core_message():
    g = chain()
    with pytest.raises(ValueError, match="unknown solver 'nosuch'"):
        remat.solve(g, "50%", "nosuch")
    with pytest.raises(ValueError, match="invalid budget 'half'"):
        remat.solve(g, "half", "none")
    with pytest.raises(ValueError, match="none: unknown parameter 'tmep'"):
        remat.solve(g, "100%", "none", tmep=3)
    with pytest.raises(ValueError, match="negative size"):
        remat.Graph.build("bad", [{"name": "x", "size": -1}], [])
    with pytest.raises(ValueError, match="unknown value 'zz'"):
        remat.Graph.build("bad", VALUES, [{"name": "f", "inputs": ["zz"], "outputs": ["a"]}])
    with pytest.raises(ValueError, match="cannot open"):
        remat.load("/nonexistent/graph.json")


def test_budget_below_lower_bound_is_infeasible_not_an_error():
    g = chain()
    r = remat.solve(g, 10, "none")
    assert r.status == "infeasible" and not r.feasible
    assert remat.memory_lower_bound(g) > 10


def test_save_and_load_round_trip(tmp_path):
    g = chain()
    path = str(tmp_path / "chain.json")
    remat.save(g, path)
    h = remat.load(path)
    assert (h.num_nodes, h.num_values) == (3, 4)
    assert remat.baseline(h) == remat.baseline(g)
    assert h.node(2)["name"] == "h" and h.value(3)["output"]


def test_progress_callback_is_called_and_its_errors_are_raised():
    solver = "fastsa"  # reports progress every 0.25 s
    if solver not in remat.solvers():
        pytest.skip(f"fastsa not registered (have: {', '.join(remat.solvers())})")
    g = remat.load(EXAMPLE)
    calls = []
    tight = remat.memory_lower_bound(g)  # hard to meet, so the solver runs long enough to report
    remat.solve(g, tight, solver, time_limit=1.0, progress=lambda *a: calls.append(a))
    assert calls and all(isinstance(c[0], str) and c[1] <= 1.0 for c in calls)

    def fail(*args):
        raise KeyError("stop")

    with pytest.raises(KeyError, match="stop"):
        remat.solve(g, tight, solver, time_limit=1.0, progress=fail)


def test_graph_dicts_with_wrong_types_are_value_errors_naming_the_field():
    # Fields are read by type, so a wrong type is named instead of crashing or
    # being converted silently.
    with pytest.raises(ValueError, match="'size'"):
        remat.Graph.build("bad", [{"name": "x", "size": "64"}], [])
    with pytest.raises(ValueError, match="'name'"):
        remat.Graph.build("bad", [{"name": 3, "size": 64}], [])
    with pytest.raises(ValueError, match="'cost'"):
        remat.Graph.build("bad", VALUES, [{"name": "f", "cost": "1", "inputs": ["x"],
                                           "outputs": ["a"]}])
    with pytest.raises(ValueError, match="'output'"):
        remat.Graph.build("bad", [{"name": "x", "size": 64, "output": "yes"}], [])
    with pytest.raises((ValueError, TypeError)):
        remat.Graph.build(None, VALUES, NODES)


def test_solve_settings_and_budgets_are_range_checked_before_the_core():
    # Thread counts and budgets are checked before they reach the core, where a huge thread count
    # would start that many workers and a budget above 2^62 bytes would wrap.
    g = chain()
    with pytest.raises(ValueError, match=r"threads must be in \[1, 256\]"):
        remat.solve(g, "100%", "fastsa", threads=100000)
    with pytest.raises(TypeError, match="time_limit"):
        remat.solve(g, "100%", "none", time_limit="2")
    with pytest.raises(ValueError, match="time_limit"):
        remat.solve(g, "100%", "none", time_limit=float("nan"))
    with pytest.raises(ValueError, match="2\\^62"):
        remat.solve(g, 1 << 70, "none")
    with pytest.raises(ValueError, match="2\\^62"):
        remat.solve(g, "1e30", "none")
    assert remat.solve(g, 1 << 62, "none").budget_bytes == 1 << 62


def test_graph_fingerprint_is_the_content_not_the_name():
    a = remat.Graph.build("one", VALUES, NODES)
    b = remat.Graph.build("two", VALUES, NODES)
    assert remat.graph_fingerprint(a) == remat.graph_fingerprint(b)
    heavier = [dict(v) for v in VALUES]
    heavier[0]["size"] = 65
    assert remat.graph_fingerprint(remat.Graph.build("one", heavier, NODES)) != \
        remat.graph_fingerprint(a)
