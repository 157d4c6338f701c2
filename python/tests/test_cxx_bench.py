"""bench/cxx_bench.py, the runner that records a C++ bench program's output: it passes the
program's arguments and exit status through, and refuses an unknown program with exit 2."""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(REPO, "bench", "cxx_bench.py")
PROGRAM = os.path.join(REPO, "build", "bench", "rotor_recurrence_check")


def run(*args):
    return subprocess.run([sys.executable, RUNNER, *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.skipif(not os.access(PROGRAM, os.X_OK), reason="bench programs not built in build/")
def test_passes_arguments_through_and_prints_the_programs_output():
    done = run("rotor_recurrence_check", "5", "2")
    assert done.returncode == 0, done.stderr
    assert "random chains (L = 1..2)" in done.stdout


@pytest.mark.skipif(not os.access(PROGRAM, os.X_OK), reason="bench programs not built in build/")
def test_a_bad_argument_is_the_programs_exit_2_and_message():
    done = run("rotor_recurrence_check", "many")
    assert done.returncode == 2
    assert "CHAINS must be a number, got 'many'" in done.stderr


def test_an_unknown_program_is_exit_2_naming_it():
    done = run("no_such_bench")
    assert done.returncode == 2
    assert "unknown bench program 'no_such_bench'" in done.stderr
