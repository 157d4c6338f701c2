"""bench/compile_bench.py's bad arguments: one message naming what is wrong and exit 2, before any
model is built."""

import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "compile_bench.py")


@pytest.mark.parametrize("args, message", [
    (["--models", "gpt,nope"], "--models: unknown model 'nope'"),
    (["--fractions", "0.5,half"], "--fractions: '0.5,half' is not a comma-separated list"),
    (["--torch-solvers", "greedy,knapsack"], "--torch-solvers: unknown solver in"),
    (["--compiler", "eager", "--without-layout-optimization"],
     "--without-layout-optimization is about Inductor's"),
])
def test_a_bad_argument_is_exit_2_naming_it(args, message):
    done = subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
