"""remat.torch.partition against functorch's min_cut_rematerialization_partition under
AOTAutograd: saved values and bytes, recomputed ops, partition time, and whether loss and
gradients equal eager PyTorch.

    ./scripts/python bench/partition_bench.py

Models: the MLP and ResNet-18 of python/tests/models.py and the GPT example (2 layers, batch
2x32, vocabulary 64), the shapes of python/tests/test_torch_partition.py. remat plans with its
`mincut` solver and no memory budget (the default of rt.partition).
"""

import copy
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))

import remat.torch as rt  # noqa: E402
from remat.torch import _compat  # noqa: E402
from remat.torch.partition import partition_stats  # noqa: E402


def run(model, batch, loss_fn, partition_fn):
    model = copy.deepcopy(model)
    figures = {}

    def timed(joint, inputs, **kwargs):
        start = time.perf_counter()
        fw, bw = partition_fn(joint, inputs, **kwargs)
        seconds = time.perf_counter() - start
        figures["stats"] = partition_stats(fw, bw, len(_compat.joint_outputs(joint)[0]),
                                           seconds)
        return fw, bw

    compiled = _compat.aot_module(model, _compat.nop_compiler(), _compat.nop_compiler(), timed)
    torch.manual_seed(7)
    loss = loss_fn(compiled(batch[0]), *batch[1:])
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()], figures["stats"]


def main():
    import train_gpt
    from models import MODELS

    cases = {"MLP": MODELS["mlp"], "ResNet-18 16x3x96x96": MODELS["resnet18"],
             "GPT example 2x32": lambda: train_gpt.make(2, context=32, vocab=64, layers=2)}
    print(f"torch {torch.__version__}")
    print("| model | partitioner | saved values | saved bytes | recomputed ops | partition s "
          "| same as eager |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, make in cases.items():
        model, batch, loss_fn = make()
        eager = copy.deepcopy(model)
        torch.manual_seed(7)
        loss = loss_fn(eager(batch[0]), *batch[1:])
        loss.backward()
        for label, fn in (("functorch min-cut", _compat.functorch_min_cut_partition()),
                          ("remat mincut", rt.partition)):
            got_loss, grads, s = run(model, batch, loss_fn, fn)
            same = torch.equal(loss.detach(), got_loss) and all(
                torch.equal(p.grad, g) for p, g in zip(eager.parameters(), grads))
            print(f"| {name} | {label} | {len(s.saved)} | {s.saved_bytes:,} | "
                  f"{len(s.recomputed)} | {s.seconds:.3f} | {'yes' if same else 'NO'} |")


if __name__ == "__main__":
    main()
