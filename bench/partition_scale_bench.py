"""How the compile backend's planning time grows with depth: HF GPT-2 (d = 64, 2 heads, batch
4 x 64, random init) with more and more layers, compiled with remat's backend (solver "auto",
the eager compiler), one joint graph planned per model.

    ./scripts/python bench/partition_scale_bench.py --layers 12,24,48 --fraction 0.3 --results

Per model: the partition's wall seconds, the CPU seconds of the whole compile, the CPU seconds of
the greedy members within them (remat.torch.partition's `greedy` solver run, and FastSA started
from its plan when that plan fits), the plan that won, its recomputed MFLOP and its simulated
activation memory against the budget. --results writes the table to
bench/results/partition_scale_bench.md (or the file given) as well.
"""

import argparse
import sys
import time
import warnings

import torch

import bench_results  # noqa: E402 (bench/, beside this file)
import remat.torch as rt  # noqa: E402

# remat.torch.partition is also the name of the function the package exports.
partition_module = sys.modules["remat.torch.partition"]


def gpt2(layers):
    import transformers

    config = transformers.GPT2Config(n_layer=layers, n_embd=64, n_head=2, n_positions=64,
                                     vocab_size=128, bos_token_id=0, eos_token_id=0,
                                     use_cache=False)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 128, (4, 64), generator=torch.Generator().manual_seed(0))
    return model, ids


class GreedyClock:
    """Counts the CPU seconds spent in the greedy members while installed."""

    def __init__(self):
        self.seconds = 0.0
        self.original = partition_module._greedy_members

    def __enter__(self):
        def timed(*args, **kwargs):
            start = time.process_time()
            try:
                return self.original(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - start

        partition_module._greedy_members = timed
        return self

    def __exit__(self, *exc):
        partition_module._greedy_members = self.original


def measure(layers, fraction):
    model, ids = gpt2(layers)
    backend = rt.compile_backend(budget=fraction, solver="auto", compiler="eager")
    step = torch.compile(lambda i: model(input_ids=i, labels=i).loss, backend=backend)
    with GreedyClock() as greedy, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = time.process_time()
        step(ids).backward()
        cpu = time.process_time() - cpu
    stats = backend.graphs[0]
    return (f"| {layers} | {stats.seconds:.1f} | {cpu:.1f} | {greedy.seconds:.1f} | "
            f"{stats.solver} | {stats.recomputed_flops / 1e6:.1f} | "
            f"{stats.planned_activation_bytes / 1e6:.2f} | {stats.budget_bytes / 1e6:.2f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", default="12,24,48", help="comma-separated layer counts")
    p.add_argument("--fraction", type=float, default=0.3, help="budget: activation fraction")
    p.add_argument("--results", nargs="?", const=bench_results.default_path(
        "partition_scale_bench"), help="also write the table to this file (default "
        "bench/results/partition_scale_bench.md)")
    args = p.parse_args()
    try:
        layers = [int(n) for n in args.layers.split(",")]
    except ValueError:
        p.error(f"--layers: comma-separated integers (got {args.layers!r})")
    if not 0 < args.fraction <= 1:
        p.error(f"--fraction must be in (0, 1] (got {args.fraction})")
    torch.set_num_threads(1)
    with bench_results.recorded("partition_scale_bench", args.results):
        print(f"HF GPT-2, d = 64, batch 4 x 64; solver auto at {args.fraction:.0%} of the "
              "activation memory, eager compiler, one thread; the first graph (the model)\n")
        print("| layers | partition s | compile CPU s | greedy members CPU s | winner | "
              "recomputed MFLOP | planned MB | budget MB |")
        print("| ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
        for n in layers:
            print(measure(n, args.fraction), flush=True)


if __name__ == "__main__":
    main()
