"""How many C++ kernels Inductor compiles for a model's training step with PyTorch's default
partition and with remat's backend, per graph, without compiling any: each kernel's source is
recorded and a stub that does nothing stands in for it (the step runs, its numbers are not the
model's). A CPU kernel is one C++ compiler run, most of a compile's CPU seconds
(bench/compile_bench.py times them); Inductor compiles a source once per graph, so repeated
blocks whose kernels are the same cost one run.

    ./scripts/python bench/kernel_count.py                        # ResNet-50, remat auto at 0.8
    ./scripts/python bench/kernel_count.py --models gpt --fractions 0.5,0.8

Per model and configuration: the kernels of the forward and of the backward graph, and how many
of them differ by more than their constants (sizes and strides: the same code for other shapes),
and the graphs' fx calls (what Inductor lowers). The model factories are compile_bench's.
"""

import argparse
import copy
import os
import re
import sys
import time
import warnings

import torch
from torch._inductor import async_compile
from torch._inductor.utils import fresh_cache

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compile_bench  # noqa: E402
from remat.torch import _compat  # noqa: E402


class KernelRecorder:
    """Inductor's C++ kernel loads replaced by stubs, each source recorded with the graph
    ("forward" or "backward") being compiled."""

    def __init__(self):
        self.sources, self.calls, self.side = [], {}, None

    def __enter__(self):
        self._saved = (async_compile.AsyncCompile.cpp_pybinding, async_compile.AsyncCompile.cpp,
                       _compat._compile_graph)
        compile_graph = _compat._compile_graph

        def record(source):
            self.sources.append((self.side, source))
            return lambda *args: None

        def graph(gm, inputs, **kwargs):
            backward = any(n.op == "placeholder" and _compat.is_tangent(n)
                           for n in gm.graph.nodes)
            self.side = "backward" if backward else "forward"
            self.calls[self.side] = sum(n.op == "call_function" for n in gm.graph.nodes)
            return compile_graph(gm, inputs, **kwargs)

        async_compile.AsyncCompile.cpp_pybinding = lambda _, argtypes, source: record(source)
        async_compile.AsyncCompile.cpp = lambda _, source: record(source)
        _compat._compile_graph = graph
        return self

    def __exit__(self, *exc):
        (async_compile.AsyncCompile.cpp_pybinding, async_compile.AsyncCompile.cpp,
         _compat._compile_graph) = self._saved

    def figures(self, side):
        """(kernels, kernels differing by more than their constants) of graph `side`."""
        sources = {s for g, s in self.sources if g == side}
        return len(sources), len({re.sub(r"\b\d+(\.\d+)?[LfU]*\b", "N", s) for s in sources})


def count(make, backend_maker):
    """A KernelRecorder of one compiled training step of `make`'s model and the CPU seconds of
    its partition and Inductor's lowering (no C++ compiler runs)."""
    model, batch, loss_fn = make()
    model = copy.deepcopy(model).train()
    torch._dynamo.reset()
    step = compile_bench.train_step_fn(model, batch, compile_bench.step_fn(
        model, batch, loss_fn, backend_maker()))
    with KernelRecorder() as recorder, fresh_cache():
        start = time.process_time()
        step()
        seconds = time.process_time() - start
    return recorder, seconds


def main():
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--models", default="resnet50")
    p.add_argument("--fractions", default="0.8")
    p.add_argument("--solver", default="auto")
    args = p.parse_args()
    models = compile_bench.listed(p, "--models", args.models, compile_bench.MODELS, "model")
    fractions = compile_bench.fractions_of(p, args.fractions)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    print("| model | configuration | forward kernels | backward kernels | forward calls "
          "| backward calls | CPU s without C++ |")
    print("|" + " --- |" * 7)
    patches = {"fx_graph_cache": False, "fallback_random": True, "compile_threads": 1}
    with torch._inductor.config.patch(patches), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        for name in models:
            make = compile_bench.MODELS[name]
            default = compile_bench.RecordingPartition("default")
            rows = [("pytorch default",
                     lambda: lambda gm, inputs: _compat.inductor_compile(gm, inputs, default))]
            rows += [(f"remat {args.solver} {f}",
                      lambda f=f: compile_bench.remat_backend(f, args.solver, "inductor"))
                     for f in fractions]
            count(make, rows[0][1])  # the process's one-time costs land on no row
            for label, maker in rows:
                recorder, seconds = count(make, maker)
                shown = [f"{a} ({b} by more than constants)"
                         for a, b in map(recorder.figures, ("forward", "backward"))]
                print(f"| {name} | {label} | {shown[0]} | {shown[1]} | "
                      f"{recorder.calls.get('forward', '-')} | "
                      f"{recorder.calls.get('backward', '-')} | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
