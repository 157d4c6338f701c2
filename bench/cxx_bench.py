#!/usr/bin/env python3
"""cxx_bench — runs one of the C++ bench programs (build/bench/NAME) and, with --results, writes
what it prints to bench/results/NAME.md below the command, date, commit and machine, as the Python
benches do (bench_results.py). Arguments after NAME go to the program.

    ./scripts/python bench/cxx_bench.py mincut_bench --results
    ./scripts/python bench/cxx_bench.py fastsa_bench --only table --results
    ./scripts/python bench/cxx_bench.py checkmate_bench --only RL1 --time-limit 60

REMAT_BUILD_DIR names another build folder (default build/). The program's exit status is this
script's; a failed run leaves the previous results file in place.
"""
import os
import subprocess
import sys

import bench_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = ("checkmate_bench", "core_bench", "fastsa_bench", "graph_chain_bench", "mincut_bench",
            "moccasin_bench", "rotor_bench", "rotor_recurrence_check", "work_unit_bench")


def parse(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if argv else 2)
    name, rest = argv[0], argv[1:]
    if name not in PROGRAMS:
        print(f"cxx_bench: unknown bench program '{name}' (one of: {', '.join(PROGRAMS)})",
              file=sys.stderr)
        sys.exit(2)
    results = None
    if "--results" in rest:
        rest = [a for a in rest if a != "--results"]
        results = bench_results.default_path(name)
    return name, rest, results


def main():
    name, args, results = parse(sys.argv[1:])
    build = os.environ.get("REMAT_BUILD_DIR", os.path.join(ROOT, "build"))
    program = os.path.join(build, "bench", name)
    if not os.access(program, os.X_OK):
        print(f"cxx_bench: {program} is not built (./scripts/setup.sh builds it)", file=sys.stderr)
        sys.exit(2)
    # From the repository root, as the programs' usage lines say (they find data relative to it).
    run = subprocess.run([program, *args], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.stdout.write(run.stdout)
        sys.exit(run.returncode)
    with bench_results.recorded(name, results, f"`build/bench/{name}` (run by `bench/cxx_bench.py`)"):
        # Their tables are aligned plain text, not Markdown.
        sys.stdout.write(f"```text\n{run.stdout}```\n")


if __name__ == "__main__":
    main()
