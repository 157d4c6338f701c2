"""An AOTAutograd joint graph as a JSON file, and back: the graph a lent GPU machine's compile
path partitions (its CUDA kernels, Inductor's CUDA decompositions) read on a machine without one,
where remat's partition runs on it with fake CUDA tensors (bench/partition_dump.py --joint writes
one; `read` gives the module and the partition function's keywords). A path ending in .gz is
gzipped.

Each node keeps its name, op, target and arguments; a placeholder keeps its tensor's shape,
strides, dtype and device, from which `read` propagates fake tensors through the graph; other
metadata that pickles (AOTAutograd's input and output descriptors, checkpoint tags) travels
pickled, as base64.
"""

import base64
import gzip
import json
import operator
import pickle

import torch
import torch._higher_order_ops.triton_kernel_wrap  # noqa: F401 - FakeTensorProp needs it loaded
import torch._inductor.inductor_prims  # noqa: F401 - the prims Inductor's decompositions call
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

_FUNCTIONS = {"operator.getitem": operator.getitem}
_UNSENT_META = {"val", "tensor_meta", "example_value", "stack_trace", "source_fn_stack",
                "nn_module_stack", "fwd_nn_module_stack", "fwd_source_fn_stack", "from_node",
                "seq_nr", "original_aten"}


def write(joint_module, path, **partition_keywords):
    """Writes `joint_module` (a GraphModule whose placeholders carry meta["val"]) and the
    partition keywords that are plain JSON (num_fwd_outputs) to `path`."""
    nodes = []
    for n in joint_module.graph.nodes:
        entry = {"name": n.name, "op": n.op, "target": _target_text(n.target),
                 "args": _encoded(n.args), "kwargs": _encoded(n.kwargs),
                 "meta": _pickled_meta(n.meta)}
        if n.op == "placeholder":
            val = n.meta["val"]
            entry["tensor"] = {"shape": list(val.shape), "stride": list(val.stride()),
                               "dtype": str(val.dtype).removeprefix("torch."),
                               "device": str(val.device)}
        nodes.append(entry)
    keywords = {k: v for k, v in partition_keywords.items()
                if isinstance(v, (int, float, str, bool)) or v is None}
    with _open(path, "wt") as f:
        json.dump({"torch": torch.__version__, "keywords": keywords, "nodes": nodes}, f)


def read(path):
    """(GraphModule with fake tensors in meta["val"], partition keywords) of a file `write`
    wrote."""
    with _open(path, "rt") as f:
        data = json.load(f)
    graph = fx.Graph()
    made = {}
    for entry in data["nodes"]:
        args = _decoded(entry["args"], made)
        kwargs = _decoded(entry["kwargs"], made)
        target = _target(entry["op"], entry["target"])
        if entry["op"] == "output":
            node = graph.output(args[0])
        else:
            node = graph.create_node(entry["op"], target, tuple(args), kwargs, name=entry["name"])
        for key, text in entry["meta"].items():
            node.meta[key] = pickle.loads(base64.b64decode(text))
        made[entry["name"]] = node
    module = fx.GraphModule(torch.nn.Module(), graph)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        inputs = [torch.empty_strided(e["tensor"]["shape"], e["tensor"]["stride"],
                                      dtype=getattr(torch, e["tensor"]["dtype"]),
                                      device=e["tensor"]["device"])
                  for e in data["nodes"] if e["op"] == "placeholder"]
    FakeTensorProp(module, mode).propagate_dont_convert_inputs(*inputs)
    for n, fake in zip((n for n in module.graph.nodes if n.op == "placeholder"), inputs):
        n.meta["val"] = fake
    return module, data["keywords"]


def _open(path, mode):
    return gzip.open(path, mode) if str(path).endswith(".gz") else open(path, mode[0])


def _target_text(target):
    if isinstance(target, str):
        return target
    if isinstance(target, torch._ops.OpOverload):
        return "op:" + target.name()  # namespace::name.overload
    for name, function in _FUNCTIONS.items():
        if target is function:
            return "fn:" + name
    raise ValueError(f"joint_graph_file: cannot write the target {target!r}")


def _target(op, text):
    if op in ("placeholder", "output", "get_attr") or not text.startswith(("op:", "fn:")):
        return text
    if text.startswith("fn:"):
        return _FUNCTIONS[text[3:]]
    namespace, rest = text[3:].split("::")
    name, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")


def _encoded(a):
    if isinstance(a, fx.Node):
        return {"node": a.name}
    if isinstance(a, (list, tuple)):
        return {"list" if isinstance(a, list) else "tuple": [_encoded(x) for x in a]}
    if isinstance(a, dict):
        return {"dict": {k: _encoded(v) for k, v in a.items()}}
    if a is None or isinstance(a, (bool, int, float, str)):
        return a
    if isinstance(a, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return {"pickled": base64.b64encode(pickle.dumps(a)).decode()}
    raise ValueError(f"joint_graph_file: cannot write the argument {a!r}")


def _decoded(a, made):
    if not isinstance(a, dict):
        return a
    if "node" in a:
        return made[a["node"]]
    if "list" in a:
        return [_decoded(x, made) for x in a["list"]]
    if "tuple" in a:
        return tuple(_decoded(x, made) for x in a["tuple"])
    if "dict" in a:
        return {k: _decoded(v, made) for k, v in a["dict"].items()}
    return pickle.loads(base64.b64decode(a["pickled"]))


def _pickled_meta(meta):
    sent = {}
    for key, value in meta.items():
        if key in _UNSENT_META:
            continue
        try:
            sent[key] = base64.b64encode(pickle.dumps(value)).decode()
        except Exception:  # noqa: BLE001 - metadata that does not pickle stays behind
            pass
    return sent
