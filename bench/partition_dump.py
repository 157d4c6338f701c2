"""The joint graphs the compile path partitions for one model of bench/compile_bench.py at one
budget fraction, written as files (bench/joint_graph_file.py), for a graph made on a machine
where it cannot be made here (the CUDA joint graph on a lent GPU machine) to be partitioned again
elsewhere, with fake tensors of its device:

    python3 bench/partition_dump.py --model hf-llama --fraction 0.8 --device cuda --out DIR

DIR gets `joint_<i>.json` for each graph the backend partitions (with the keywords it passed:
num_fwd_outputs, memory_cap). It prints each graph remat planned (the joint graph with its
backward's copies of forward chains, and the others it tried: solver, budget, peak, cost) and
each partition the simulator followed (PyTorch's default partition, remat's own). Read one back
with `joint_graph_file.read(path)` and call remat.torch.partition.partition on it.
"""

import argparse
import importlib
import json
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compile_bench  # noqa: E402
import joint_graph_file  # noqa: E402

partition_module = importlib.import_module("remat.torch.partition")
compile_module = importlib.import_module("remat.torch.compile")


class Recorder:
    """Wraps the compile backend's partition to write each joint graph it is given, and
    partition.py's _plan and _evaluate to print what they find."""

    def __init__(self, out):
        self.out, self.joints, self.planned, self.evaluated = out, 0, 0, 0
        self.partition = compile_module.partition
        self.plan, self.evaluate = partition_module._plan, partition_module._evaluate

    def partition_function(self):
        """The backend's partition, writing each joint graph first (a function, with the
        `last` attribute the backend reads)."""

        def recorded(joint_module, joint_inputs=None, **kwargs):
            path = os.path.join(self.out, f"joint_{self.joints}.json")
            self.joints += 1
            joint_graph_file.write(joint_module, path, **kwargs)
            print(f"{path}: {len(joint_module.graph.nodes)} fx nodes, memory_cap "
                  f"{kwargs.get('memory_cap')}", flush=True)
            result = self.partition(joint_module, joint_inputs, **kwargs)
            recorded.last = self.partition.last
            return result

        return recorded

    def recorded_plan(self, planned_module, joint, budget, asked, *args, **kwargs):
        planned = self.plan(planned_module, joint, budget, asked, *args, **kwargs)
        self.planned += 1
        print(f"planned graph {self.planned}: {joint.graph.num_nodes} nodes, asked {asked} B "
              f"of activations (+{joint.input_bytes} B inputs), planner {planned.plan.planner}, "
              f"peak {planned.peak_bytes} B ({planned.peak_bytes - joint.input_bytes} B of "
              f"activations), cost {planned.cost:.4g}", flush=True)
        return planned

    def recorded_evaluate(self, graph, sequence):
        evaluation = self.evaluate(graph, sequence)
        if sequence == list(range(graph.num_nodes)):  # simulate_partition's run of both graphs
            self.evaluated += 1
            print(f"partition simulated {self.evaluated}: {graph.num_nodes} calls, peak "
                  f"{evaluation.peak_bytes} B", flush=True)
        return evaluation


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="hf-llama", choices=sorted(compile_bench.MODELS))
    p.add_argument("--fraction", type=float, default=0.8)
    p.add_argument("--solver", default="auto")
    p.add_argument("--compiler", default="inductor", choices=("inductor", "eager"))
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    recorder = Recorder(args.out)
    compile_module.partition = recorder.partition_function()
    partition_module._plan = recorder.recorded_plan
    partition_module._evaluate = recorder.recorded_evaluate
    with torch._inductor.config.patch({"fx_graph_cache": False, "fallback_random": True}), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        row = compile_bench.measure(
            compile_bench.MODELS[args.model],
            lambda: compile_bench.remat_backend(args.fraction, args.solver, args.compiler), {},
            steps=1, device=args.device)
    print(json.dumps(row["plan"], indent=1))
    print(f"measured peak {row['peak_bytes']} B, simulated {row['simulated_bytes']}")


if __name__ == "__main__":
    main()
