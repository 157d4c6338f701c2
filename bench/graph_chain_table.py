"""Rotor on traced graphs against FastSA, printed as tables.

    ./scripts/python bench/graph_chain_table.py [--time-limit 10]

1. Traces the 6-layer GPT of examples/train_gpt.py (batch 8 x 128) and torchvision's ResNet-18
   (batch 16 x 3 x 96 x 96), and a GPT of about 2,000 nodes (14 layers, batch 4 x 64).
2. `remat compare --solvers fastsa,rotor --budgets 70%,50%,40%` on the first two: status, peak %
   of the baseline peak, CI % (extra compute), solve time.
3. build/bench/graph_chain_bench on all three: extraction, DP (500 bins) and lowering times.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))

import remat  # noqa: E402
import remat.torch as rt  # noqa: E402
import train_gpt  # noqa: E402
from models import resnet18  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=10.0)
    args = parser.parse_args()
    binary = os.path.join(ROOT, "build", "src", "remat")
    bench = os.path.join(ROOT, "build", "bench", "graph_chain_bench")
    with tempfile.TemporaryDirectory() as tmp:
        graphs = {}
        for label, make in [("GPT 6 layers", lambda: train_gpt.make(8, layers=6)),
                            ("ResNet-18", resnet18),
                            ("GPT 14 layers", lambda: train_gpt.make(4, context=64,
                                                                     layers=14))]:
            model, batch, loss_fn = make()
            traced = rt.trace(model, batch, loss_fn)
            path = os.path.join(tmp, label.replace(" ", "_") + ".json")
            remat.save(traced.graph, path)
            graphs[label] = (path, traced.graph.num_nodes)
        print(f"{'graph':<14} {'nodes':>6} {'solver':<7} {'budget':>6} {'status':<12} "
              f"{'peak %':>7} {'CI %':>8} {'time s':>7}")
        for label in ("GPT 6 layers", "ResNet-18"):
            path, nodes = graphs[label]
            out = subprocess.run([binary, "compare", path, "--solvers", "fastsa,rotor",
                                  "--budgets", "70%,50%,40%", "--time-limit",
                                  str(args.time_limit), "--json"], check=True,
                                 capture_output=True, text=True).stdout
            for row in json.loads(out):
                if row["status"] in ("not-applicable", "infeasible"):
                    peak = ci = t = "-"
                else:
                    peak = f"{row['peak_percent_of_baseline']:.1f}"
                    ci = f"{row['cost_increase_percent']:.2f}"
                    t = f"{row['solve_time_s']:.3f}"
                print(f"{label:<14} {nodes:>6} {row['solver']:<7} {row['budget']:>6} "
                      f"{row['status']:<12} {peak:>7} {ci:>8} {t:>7}")
        print()
        sys.stdout.flush()
        subprocess.run([bench] + [graphs[label][0] for label in graphs], check=True)


if __name__ == "__main__":
    main()
