"""bench/block_corpus.py's capture of an AOTAutograd joint graph, made afresh with the PyTorch
installed: it is the committed tests/data/blocks/gpt4_aot.json (which the C++ tests read), so the
corpus is current; and on it rockmate finds 4 blocks of each kind of a 4-layer GPT and a plan at
half the peak that fits with a cost no higher than rotor's."""

import json
import os
import sys

import remat
from remat import _remat

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

import block_corpus  # noqa: E402


def test_aot_joint_graph_of_a_four_layer_gpt_is_the_committed_one_with_four_blocks_of_each_kind():
    graph, _ = block_corpus.gpt_aot()  # examples/train_gpt.py's GPT, batch 8 x 128, aot_module
    text = block_corpus.corpus_text(graph)
    with open(os.path.join(REPO, "tests", "data", "blocks", "gpt4_aot.json"),
              encoding="utf-8") as f:
        assert text == f.read(), "tests/data/blocks is stale: run bench/block_corpus.py"
    graph = remat.Graph.from_json(text, "gpt4_aot.json")
    ops = {graph.node(i)["op"] for i in range(graph.num_nodes)}
    assert "native_dropout" in ops  # AOTAutograd's own calls, not our tracer's
    blocks = _remat.rockmate_blocks(graph)
    repeated = sorted((len(c["members"]) for c in blocks["classes"] if len(c["members"]) > 1),
                      reverse=True)
    assert repeated == [4, 4]  # attention and MLP
    assert blocks["note"] == ""
    rockmate = remat.solve(graph, "50%", "rockmate", budgets="1x1")
    rotor = remat.solve(graph, "50%", "rotor")
    assert rockmate.peak_bytes <= remat.parse_budget(graph, "50%")
    assert rockmate.cost <= rotor.cost
