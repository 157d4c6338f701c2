"""Where a plan makes a normalization's statistics: the same in every repeated block."""

import copy
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import remat.torch  # noqa: F401 - registers remat.torch.partition
from test_compile import joint_graph_of

partition_module = sys.modules["remat.torch.partition"]


class ConvBlocks(nn.Module):
    """Identical residual blocks of a convolution, a batch norm and a ReLU."""

    def __init__(self, width=8, blocks=3):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU())
            for _ in range(blocks))
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return self.head(x.mean((2, 3)))


def rewritten_joint():
    """(module, JointGraph) of ConvBlocks' step as partition plans it with fusion: its
    statistics split from the normalizations (split_statistic_tails), the backward's copies of
    the forward's chains made."""
    torch.manual_seed(0)
    joint, outputs = joint_graph_of(ConvBlocks(), (torch.randn(8, 8, 16, 16),
                                                   torch.randint(0, 10, (8,))), F.cross_entropy)
    default = partition_module.JointGraph(copy.deepcopy(joint), outputs, backward_start=True,
                                          fuse=True)
    return partition_module._rewritten(joint, default, outputs)[-1]


def test_statistic_steps_are_the_normalizations_statistics_in_each_block():
    module, joint = rewritten_joint()
    steps = partition_module.statistic_steps(joint)
    names = {m.name.rstrip("0123456789_") for s in steps for m in joint.node_fx[s]}
    rsqrt = [s for s in steps if any(m.name.startswith("rsqrt") for m in joint.node_fx[s])]
    assert len(rsqrt) == len(ConvBlocks().blocks)
    assert "var_mean" in names
    # A statistic step makes no value as large as the activations it is reduced from.
    largest = max(joint.values[v]["size"] for v in range(len(joint.values)))
    assert all(joint.values[v]["size"] * 4 <= largest for s in steps
               for v in joint.nodes[s]["outputs"])


def test_a_plan_remaking_every_statistic_in_the_backward_makes_each_once_in_the_forward():
    module, joint = rewritten_joint()
    sequence = partition_module.just_in_time(joint, set())
    start = sequence.index(joint.backward_start)
    steps = partition_module.statistic_steps(joint)
    assert steps & set(sequence[start + 1:])  # the start plan remakes statistics
    lowered = partition_module._lower(module, joint, sequence, "just in time")
    planned = partition_module._Planned(joint, lowered, lowered.peak_bytes + 4096, None, 0)
    placed = partition_module._statistics_saved(planned).plan
    assert placed is not lowered
    after = placed.executed[placed.executed.index(joint.backward_start) + 1:]
    assert not steps & set(after)
    assert placed.cost < lowered.cost
    assert placed.peak_bytes <= planned.solve_budget

