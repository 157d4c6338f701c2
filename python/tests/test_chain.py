"""remat.Chain: the C++ chain bound into Python (built from fields, read and written as remat chain
JSON by the core's one reader and writer), and the chain functions that take it or its text."""

import copy
import json
import os
import pickle

import pytest

import remat
from remat import _remat

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TOY = os.path.join(ROOT, "examples", "rotor_toy.json")


def toy_from_fields():
    """examples/rotor_toy.json rebuilt field by field through the bound constructors."""
    doc = json.load(open(TOY))
    stages = [remat.ChainStage(**s) for s in doc["stages"]]
    return remat.Chain(doc["name"], remat.ChainSizes(**doc["input"]), stages)


def test_a_chain_built_from_fields_is_the_chain_the_reader_reads(tmp_path):
    built = toy_from_fields()
    read = _remat.load_chain(TOY)
    assert built == read and built.to_json() == read.to_json()
    assert built.length == len(json.load(open(TOY))["stages"]) - 1
    assert [s.name for s in built.stages] == [s.name for s in read.stages]
    path = tmp_path / "toy.json"
    _remat.save_chain(built, str(path))
    assert _remat.load_chain(str(path)) == built
    assert remat.Chain.from_json(path.read_text()) == built


def test_sizes_default_to_the_output_size_as_in_chain_json():
    stage = remat.ChainStage(name="s", u_f=1, u_b=2, a=8)
    assert (stage.a, stage.abar, stage.delta, stage.o_f, stage.o_b) == (8, 8, 8, 0, 0)
    chain = remat.Chain("c", remat.ChainSizes(a=4), [stage, remat.ChainStage(name="loss", a=0)])
    assert remat.Chain.from_json(chain.to_json()).stages[0].abar == 8


def test_a_chain_survives_copy_and_pickle():
    chain = toy_from_fields()
    assert copy.deepcopy(chain) == chain
    assert pickle.loads(pickle.dumps(chain)) == chain


def test_bad_chain_fields_are_value_errors_naming_what_is_wrong():
    loss = remat.ChainStage(name="loss", a=0)
    with pytest.raises(ValueError, match="'a' must be int"):
        remat.ChainStage(a=1.5)
    with pytest.raises(ValueError, match="unknown field 'size'"):
        remat.ChainStage(size=4)
    with pytest.raises(ValueError, match="has no 'a'"):
        remat.ChainSizes(abar=4)
    with pytest.raises(ValueError, match="stage 1: a size is negative"):
        remat.Chain("c", remat.ChainSizes(a=1), [remat.ChainStage(a=-1), loss])
    with pytest.raises(ValueError, match="times must be finite"):
        remat.Chain("c", remat.ChainSizes(a=1), [remat.ChainStage(a=1, u_f=float("nan")), loss])
    with pytest.raises(ValueError, match="at least one stage before the loss"):
        remat.Chain("c", remat.ChainSizes(a=1), [loss])
    with pytest.raises(ValueError, match="remat.Chain or remat chain JSON text"):
        _remat.chain_simulate(3, [])
    with pytest.raises(ValueError, match="remat.Chain or remat chain JSON text"):
        remat.solve_chain({"stages": []}, "50%")


def test_solve_chain_gives_the_same_plan_on_the_chain_and_on_its_text():
    chain = toy_from_fields()
    on_chain = remat.solve_chain(chain, "80%", "rotor")
    on_text = remat.solve_chain(chain.to_json(), "80%", "rotor")
    assert on_chain["ops"] == on_text["ops"] and on_chain["feasible"]
    store_all = chain.store_all()
    assert store_all["valid"]
    assert on_chain["budget_bytes"] == store_all["peak_bytes"] * 80 // 100
    assert on_chain["store_all_peak_bytes"] == store_all["peak_bytes"]
    # The plan's figures are the chain simulator's.
    again = chain.simulate(on_chain["ops"])
    assert (again["peak_bytes"], again["cost"]) == (on_chain["peak_bytes"], on_chain["cost"])
    assert chain.simulate(chain.store_all_ops()) == store_all


def test_chain_budgets_are_read_as_the_cli_reads_them():
    chain = toy_from_fields()
    peak = chain.store_all()["peak_bytes"]
    assert remat.solve_chain(chain, str(peak), "rotor")["budget_bytes"] == peak
    assert remat.solve_chain(chain, "1KB", "none")["budget_bytes"] == 1000
    assert remat.solve_chain(chain, 100.0, "none")["budget_bytes"] == 100
    for bad in ["fifty%", "-5%", "nan%", True, None]:
        with pytest.raises(ValueError, match="budget"):
            remat.solve_chain(chain, bad, "rotor")
