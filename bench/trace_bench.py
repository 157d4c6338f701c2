"""Tracing time against one eager training step (bar: at most 3x), with where the time goes.

    ./scripts/python bench/trace_bench.py [--repeats 3]

Models: ResNet-18 (torchvision, batch 32x3x128x128, 100 classes) and the GPT example
(examples/train_gpt.py, 4 layers, batch 8x128), the sizes of the examples. Eager step: forward,
loss and backward on the model, the median of `repeats` after one warm-up. Trace: the median of
`repeats` calls of remat.torch.trace; the stages are make_fx (capture), the recorded run of the
step (storages and writes) and the rest (rewrites, building the remat graph).
"""

import argparse
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import remat.torch as rt  # noqa: E402
from remat.torch import effects  # noqa: E402
from remat.torch import capture as capture_module  # noqa: E402


def eager_seconds(model, batch, loss_fn):
    start = time.perf_counter()
    loss_fn(model(batch[0]), *batch[1:]).backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start


class Stages:
    """Wraps the capture and the recorded run to time them inside rt.trace."""

    def __init__(self):
        self.seconds = {"capture": 0.0, "recorded run": 0.0}

    def __enter__(self):
        self.capture, self.run_all = capture_module.capture, effects.Recorder.run_all
        stages = self

        def timed_capture(*args, **kwargs):
            start = time.perf_counter()
            try:
                return stages.capture(*args, **kwargs)
            finally:
                stages.seconds["capture"] += time.perf_counter() - start

        def timed_run_all(recorder, args):
            start = time.perf_counter()
            try:
                return stages.run_all(recorder, args)
            finally:
                stages.seconds["recorded run"] += time.perf_counter() - start

        trace_module = sys.modules["remat.torch.trace"]  # rt.trace is the function
        self.trace_module = trace_module
        trace_module.capture = timed_capture
        effects.Recorder.run_all = timed_run_all
        return self

    def __exit__(self, *exc):
        self.trace_module.capture = self.capture
        effects.Recorder.run_all = self.run_all


def measure(name, model, batch, loss_fn, repeats):
    model.train()
    eager_seconds(model, batch, loss_fn)
    eager = statistics.median(eager_seconds(model, batch, loss_fn) for _ in range(repeats))
    totals, stages = [], []
    for _ in range(repeats):
        with Stages() as s:
            start = time.perf_counter()
            traced = rt.trace(model, batch, loss_fn)
            totals.append(time.perf_counter() - start)
        stages.append(s.seconds)
    total = statistics.median(totals)
    middle = stages[totals.index(sorted(totals)[len(totals) // 2])]
    rest = total - sum(middle.values())
    ratio = total / eager
    print(f"| {name} | {traced.graph.num_nodes} | {eager:.3f} | {total:.3f} | {ratio:.2f} | "
          f"{middle['capture']:.3f} | {middle['recorded run']:.3f} | {rest:.3f} | "
          f"{'yes' if ratio <= 3.0 else 'NO'} |")
    return ratio


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import train_gpt
    import train_resnet

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| model | nodes | eager step s | trace s | trace / eager | make_fx s | recorded run s "
          "| rest s | <= 3x |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ratios = [measure("ResNet-18 32x3x128x128", *train_resnet.make(32, 128, 100), args.repeats),
              measure("GPT example 8x128", *train_gpt.make(8), args.repeats)]
    return 0 if max(ratios) <= 3.0 else 1


if __name__ == "__main__":
    sys.exit(main())
