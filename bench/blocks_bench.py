"""Blocks found and plans made by rotor, rockmate and fastsa on joint graphs from several tracers,
and the time of block detection on a 10,000-node joint graph; prints the table, rockmate at
50 % against the bars, and the times.

    ./scripts/python bench/blocks_bench.py \
        [--remat build/src/remat] [--budgets 70,50,30] [--solvers rotor,rockmate,fastsa,auto] \
        [--traced] [--deep] [--time-limit 60] [--graphs NAME,...] [--no-timing]

Graphs: tests/data/blocks/*.json (bench/block_corpus.py writes them) and
tests/data/resnet18_b32_i128.json; with --traced also every model of block_corpus.py as
remat.torch.trace makes it (<name>_traced: the same models, in the project's own node order).
Per graph: the blocks and classes of
`remat info --blocks`, then per solver and budget the status, peak and CI (% of the default
schedule, from the simulator, as `remat solve --json` prints them) and the CPU seconds of the
`remat solve` process. `--remat` runs another build's binary (an older one, for a before/after).
Timing: `remat gen joint -n 10000` (and with --deep a 40-layer Llama from block_corpus.py's
make_fx, about 9,700 nodes), then the CPU seconds of `remat info --blocks` on each (reading the
file included; best of 3) and of extract_chain alone in this process (best of 3).
"""

import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import bench_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(binary, *args):
    """(exit code, stdout, stderr, CPU seconds) of one remat command."""
    before = child_cpu()
    done = subprocess.run([binary, *args], capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr, child_cpu() - before


def blocks_of(binary, path):
    code, out, err, _ = run(binary, "info", path, "--blocks", "--json")
    if code != 0:
        return "error", err.strip().splitlines()[-1] if err.strip() else "?"
    info = json.loads(out)
    sizes = sorted((len(c["members"]) for c in info["classes"]), reverse=True)
    return f"{len(info['blocks'])} ({len(info['classes'])} classes, largest {sizes[0]})", \
        "; ".join(info.get("notes", []))


def solve_row(binary, path, solver, budget, time_limit):
    code, out, err, cpu = run(binary, "solve", path, "--solver", solver, "--budget",
                              f"{budget}%", "--json", "--time-limit", str(time_limit))
    if code != 0:
        return {"status": "error", "note": err.strip().splitlines()[-1] if err.strip() else ""}
    plan = json.loads(out)
    counters = plan["stats"].get("counters", {})
    blocks = counters.get("blocks", counters.get("stages"))
    notes = plan["stats"].get("lists", {}).get("notes", [])
    return {"status": plan["status"], "peak": plan["peak_percent_of_baseline"],
            "ci": plan["cost_increase_percent"], "cpu": cpu,
            "blocks": "-" if blocks is None else f"{blocks:.0f}", "note": "; ".join(notes)}


def traced_sources(directory):
    """block_corpus.py's models as remat.torch.trace makes them (the same models, in the
    project's own node order), saved as <label>_traced.json."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import remat
    import remat.torch as rt
    import block_corpus

    paths = []
    for label, make in block_corpus.traced_models().items():
        model, args, loss_fn, kwargs = make()
        path = os.path.join(directory, label + "_traced.json")
        traced = rt.trace(model, args, loss_fn, model_inputs=0 if kwargs else 1,
                          model_kwargs=kwargs, name=label)
        remat.save(traced.graph, path)
        paths.append(path)
    return paths


def traced_label(label):
    """The traced graph of the same model as corpus graph `label`."""
    for prefix in ("gpt4", "llama4"):
        if label.startswith(prefix + "_"):
            return prefix + "_traced"
    return label + "_traced"


def bars(rows, budget=50):
    """Rockmate at `budget` on each corpus graph against the issue's bars: within budget, CI at
    most 3 %, at most 5 s CPU, and at most 1 point of CI above the same model traced."""
    print(f"\nrockmate at {budget} %: bars within budget, CI <= 3 %, <= 5 s CPU, "
          f"CI <= traced + 1")
    for label, by_solver in rows.items():
        if label.endswith("_traced") or "rockmate" not in by_solver:
            continue
        r = by_solver["rockmate"].get(budget)
        if r is None or r["status"] == "error":
            print(f"{label:<24} error")
            continue
        traced = rows.get(traced_label(label), {}).get("rockmate", {}).get(budget)
        missed = []
        if r["status"] != "feasible":
            missed.append(f"peak {r['peak']:.1f} %")
        if r["ci"] > 3:
            missed.append(f"CI {r['ci']:.2f} % > 3")
        if r["cpu"] > 5:
            missed.append(f"{r['cpu']:.1f} s > 5")
        versus = ""
        if traced and traced["status"] != "error":
            versus = f"traced CI {traced['ci']:.2f} %"
            if r["ci"] > traced["ci"] + 1:
                missed.append(f"CI {r['ci'] - traced['ci']:.2f} points above traced")
        print(f"{label:<24} CI {r['ci']:>6.2f} %  {r['cpu']:>5.2f} s  {versus:<20} "
              + ("meets the bars" if not missed else "misses: " + ", ".join(missed)))


def deep_llama(directory, layers=40):
    """The Llama-style model of block_corpus.py with `layers` layers (about 9,700 nodes at 40),
    by the same plain make_fx: a coarse forward before sharing, the slowest path of detection."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import block_corpus

    graph = block_corpus.joint_graph(*block_corpus.llama_model(layers), f"Llama {layers} layers")
    path = os.path.join(directory, f"llama{layers}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(graph, f)
    return path, f"block_corpus.py's Llama, {layers} layers"


def timing(binary, directory, deep):
    import remat
    from remat import _remat

    path = os.path.join(directory, "joint10k.json")
    code, _, err, _ = run(binary, "gen", "joint", "-n", "10000", "--seed", "1", "-o", path)
    if code != 0:
        sys.exit(f"remat gen joint failed: {err}")
    graphs = [(path, "remat gen joint -n 10000 --seed 1")]
    if deep:
        graphs.append(deep_llama(directory))
    print()
    for path, how in graphs:
        info = min(run(binary, "info", path, "--blocks")[3] for _ in range(3))
        graph = remat.load(path)
        extract = []
        for _ in range(3):
            start = time.process_time()
            x = _remat.extract_chain(graph)
            extract.append(time.process_time() - start)
        print(f"{graph.num_nodes}-node joint graph ({how}): {len(x['stages'])} stages; "
              f"remat info --blocks {info:.3f} s CPU (bar 0.5 s, reading the file included), "
              f"extract_chain {min(extract):.3f} s CPU")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remat", default=os.path.join(ROOT, "build", "src", "remat"))
    parser.add_argument("--budgets", default="70,50,30")
    parser.add_argument("--solvers", default="rotor,rockmate,fastsa,auto")
    parser.add_argument("--traced", action="store_true")
    parser.add_argument("--time-limit", type=float, default=60)
    parser.add_argument("--graphs", default="",
                        help="comma-separated corpus names (default: all of tests/data/blocks)")
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--deep", action="store_true",
                        help="also time a 40-layer Llama from plain make_fx (about 100 s to make)")
    parser.add_argument("--results", nargs="?", const=bench_results.default_path("blocks_bench"),
                        metavar="FILE", help="also write the table to FILE (default "
                        "bench/results/blocks_bench.md)")
    args = parser.parse_args()
    with bench_results.recorded("blocks_bench", args.results):
        run_bench(args)


def run_bench(args):
    with tempfile.TemporaryDirectory() as tmp:
        graphs = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "blocks", "*.json")))
        graphs.append(os.path.join(ROOT, "tests", "data", "resnet18_b32_i128.json"))
        if args.traced:
            graphs += traced_sources(tmp)
        if args.graphs:
            wanted = args.graphs.split(",")
            graphs = [g for g in graphs if os.path.basename(g)[:-5] in wanted]
        print(f"{'graph':<24} {'solver':<9} {'budget':>6} {'blocks':>6} {'status':<12} "
              f"{'peak %':>7} {'CI %':>8} {'CPU s':>7}")
        notes = []
        rows = {}
        for path in graphs:
            label = os.path.basename(path)[:-5]
            found, note = blocks_of(args.remat, path)
            print(f"{label:<24} info --blocks: {found}" + (f"  [{note}]" if note else ""))
            for solver in args.solvers.split(","):
                for budget in (int(b) for b in args.budgets.split(",")):
                    r = solve_row(args.remat, path, solver, budget, args.time_limit)
                    rows.setdefault(label, {}).setdefault(solver, {})[budget] = r
                    if r["status"] == "error":
                        print(f"{label:<24} {solver:<9} {budget:>5}% {'-':>6} error")
                        notes.append(f"{label} {solver} {budget}%: {r['note']}")
                        continue
                    print(f"{label:<24} {solver:<9} {budget:>5}% {r['blocks']:>6} "
                          f"{r['status']:<12} {r['peak']:>7.1f} {r['ci']:>8.2f} "
                          f"{r['cpu']:>7.2f}")
                    if r["note"]:
                        notes.append(f"{label} {solver} {budget}%: {r['note']}")
        for n in dict.fromkeys(notes):
            print(f"note: {n}")
        bars(rows)
        if not args.no_timing:
            timing(args.remat, tmp, args.deep)


if __name__ == "__main__":
    main()
