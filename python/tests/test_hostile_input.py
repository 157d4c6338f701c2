"""Hostile input from Python: no graph, budget or signal ends the interpreter or hangs a solve.

What could kill the process runs in a child interpreter, so a regression fails one test instead of
taking pytest down with it.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import remat
from remat import _remat

# Two nodes, and the value the second makes is not marked as an output: nothing to compute.
NO_OUTPUTS = {"format": "remat-graph", "version": 1, "name": "t",
              "values": [{"id": 0, "size": 100}, {"id": 1, "size": 100}],
              "nodes": [{"id": 0, "cost": 1, "inputs": [], "outputs": [0]},
                        {"id": 1, "cost": 1, "inputs": [0], "outputs": [1]}]}


def run_child(code):
    """Runs `code` in a fresh interpreter with this one's module path; returns the process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)


def layered(nodes, cost_scale=1.0):
    """A DAG with one output whose node i reads nodes i - 1, i - 5 and i / 2 (long-lived values,
    so recomputing saves memory), as Graph.build takes it."""
    values = [{"name": f"v{i}", "size": 100 + 37 * (i % 5), "output": i == nodes - 1}
              for i in range(nodes)]
    node_list = [{"name": f"n{i}", "cost": cost_scale * (1 + i % 7),
                  "inputs": [f"v{j}" for j in (i - 1, i - 5, i // 2) if 0 <= j < i],
                  "outputs": [f"v{i}"]}
                 for i in range(nodes)]
    return remat.Graph.build("layered", values, node_list)


def test_a_graph_without_outputs_raises_value_error_and_the_interpreter_lives():
    child = run_child(f"""
        import json, remat
        text = json.dumps({NO_OUTPUTS!r})
        for build in (lambda: remat.Graph.from_json(text),
                      lambda: remat.Graph.build("t", [{{"name": "a", "size": 1}}],
                                                [{{"name": "f", "cost": 1, "outputs": ["a"]}}])):
            try:
                build()
            except ValueError as e:
                assert "has no outputs" in str(e), e
            else:
                raise SystemExit("no error")
        print("alive")
    """)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "alive"


def test_huge_costs_reach_the_lp_scaled_and_the_interpreter_lives():
    if "checkmate-lp" not in remat.solvers():
        pytest.skip("checkmate-lp is not built (REMAT_WITH_CBC=OFF)")
    child = run_child("""
        import remat, sys
        sys.path.insert(0, %r)
        from test_hostile_input import layered
        # Clp aborted the process on objective coefficients of 1e25 or more; scaled, the LP is the
        # same problem up to scale (its rounding may break ties another way).
        huge = remat.solve(layered(20, cost_scale=3e25), "90%%", "checkmate-lp", time_limit=2.0)
        small = remat.solve(layered(20), "90%%", "checkmate-lp", time_limit=2.0)
        assert huge.feasible and huge.peak_bytes == small.peak_bytes, (huge, small)
        assert abs(huge.cost / 3e25 - small.cost) <= 0.05 * small.cost, (huge, small)
        print("alive")
    """ % os.path.dirname(os.path.abspath(__file__)))
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "alive"


def test_budgets_in_bytes_are_exact_and_decimal():
    g = layered(6)
    assert _remat.parse_budget(g, 1 << 62) == 1 << 62
    with pytest.raises(ValueError, match="above the limit of 2\\^62 bytes"):
        _remat.parse_budget(g, (1 << 62) + 1)
    for bad in ("0x10", "inf", float("nan"), float("inf"), -1):
        with pytest.raises(ValueError, match="budget"):
            _remat.parse_budget(g, bad)


def test_keyboard_interrupt_stops_a_long_solve_at_once():
    g = layered(300)
    fired = []

    def interrupt():
        fired.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(1.0, interrupt)
    # Python's own SIGINT handler, whatever an earlier test's library (Inductor's compile workers)
    # left installed: the test is of remat's polling, which runs the handler that is set.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            # A fixed schedule of many iterations runs for tens of seconds: only the interrupt
            # can end it this soon. fastsa polls the interrupt every few iterations.
            remat.solve(g, "60%", "fastsa", work_limit=1e4, time_limit=600.0, schedule="fixed",
                        iterations_scale=20)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    latency = time.monotonic() - fired[0]
    # A safety net: about 10 ms on an idle machine, more on a loaded one.
    assert latency < 5.0, f"KeyboardInterrupt arrived {latency:.2f} s after SIGINT"
    # The interrupt was for that solve only: the next one runs to its end.
    r = remat.solve(g, "60%", "fastsa", work_limit=0.01)
    assert r.stop_reason == "work_limit" and r.sequence


def test_an_exception_in_the_progress_callback_stops_the_solve():
    g = layered(300)

    def progress(*_):
        raise RuntimeError("stop here")

    start = time.monotonic()
    with pytest.raises(RuntimeError, match="stop here"):
        remat.solve(g, "60%", "fastsa", time_limit=30.0, progress=progress)
    assert time.monotonic() - start < 5.0


def test_names_with_control_characters_are_escaped_in_messages():
    values = [{"name": "a\nremat: error: forged\x1b[31m", "size": 1},
              {"name": "b", "size": 1, "output": True}]
    nodes = [{"name": "x\ny", "cost": 1, "inputs": ["b"],
              "outputs": ["a\nremat: error: forged\x1b[31m"]},
             {"name": "z", "cost": 1, "inputs": ["a\nremat: error: forged\x1b[31m"],
              "outputs": ["b"]}]
    with pytest.raises(ValueError) as caught:
        remat.Graph.build("evil", values, nodes)
    message = str(caught.value)
    assert "\n" not in message and "\x1b" not in message
    assert "'x\\ny'" in message


def test_graph_json_keeps_hostile_names(tmp_path):
    g = remat.Graph.build("q\"\\\n\x1b", [{"name": "\u2028\x00", "size": 1, "output": True}],
                          [{"name": "é", "cost": 1e297, "outputs": [0]}])
    again = remat.Graph.from_json(g.to_json())
    assert again.name == g.name and again.value(0)["name"] == "\u2028\x00"
    assert again.node(0)["cost"] == 1e297
    assert json.loads(g.to_json())["name"] == g.name
