"""python -m remat.torch trace MODEL -o graph.json: a model's training step as remat-graph JSON.
python -m remat.torch summary graph.json plan.json: what a plan recomputes and keeps (the tables
of step.summary()).

MODEL is either
  torchvision:NAME          a torchvision.models builder (random images, cross-entropy), or
  FILE.py:FUNCTION          FUNCTION(batch_size) returns (model, example_inputs, loss_fn), or
  package.module:FUNCTION   the same, imported by module name.
The file can then go to any solver: `remat solve graph.json --budget 50% --solver fastsa`,
`remat compare graph.json --budgets 90%,50%,25% --solvers ...`.
Bad arguments and models that cannot be traced end with one line on stderr and exit code 2.
"""

import argparse
import importlib
import importlib.util
import os
import sys

import remat
from remat import _remat


def _load_factory(spec):
    if ":" not in spec:
        raise ValueError(f"model '{spec}' must look like torchvision:NAME, FILE.py:FUNCTION or "
                         "module:FUNCTION")
    where, name = spec.rsplit(":", 1)
    if where == "torchvision":
        return _torchvision_factory(name)
    if where.endswith(".py"):
        if not os.path.isfile(where):
            raise ValueError(f"model file '{where}' does not exist")
        sys.path.insert(0, os.path.dirname(os.path.abspath(where)))  # as if run as a script
        module_spec = importlib.util.spec_from_file_location("remat_user_model", where)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ValueError(f"'{where}' has no function '{name}'")
    return factory


def _torchvision_factory(name):
    import torch
    import torch.nn.functional as F
    import torchvision

    builder = getattr(torchvision.models, name, None)
    if not callable(builder):
        raise ValueError(f"torchvision.models has no model '{name}'")

    def make(batch_size, image_size=224, num_classes=1000):
        torch.manual_seed(0)
        model = builder(num_classes=num_classes)
        x = torch.randn(batch_size, 3, image_size, image_size)
        y = torch.randint(0, num_classes, (batch_size,))
        return model, (x, y), F.cross_entropy

    return make


def _trace_command(args):
    from remat.torch.trace import TraceError, trace

    factory = _load_factory(args.model)
    if args.model.startswith("torchvision:"):
        model, batch, loss_fn = factory(args.batch, args.image_size, args.num_classes)
    else:
        model, batch, loss_fn = factory(args.batch)
    model.train()
    try:
        traced = trace(model, batch, loss_fn, cost=args.cost, name=args.name)
    except TraceError as error:
        raise ValueError(str(error)) from error
    remat.save(traced.graph, args.output)
    peak, cost = remat.baseline(traced.graph)
    print(f"{args.output}: {traced.graph.num_nodes} nodes, {traced.graph.num_values} values, "
          f"baseline peak {remat.format_bytes(peak)}, cost {cost:.6g}")


def _summary_command(args):
    from remat.torch.optimize import plan_summary

    graph = remat.load(args.graph)
    sequence, _, _, _ = _remat.read_plan(graph, args.plan)
    evaluation = remat.simulate(graph, sequence)
    if not evaluation.valid:
        raise ValueError(f"{args.plan}: not a valid plan of {args.graph}: {evaluation.error}")
    print(plan_summary(graph, sequence, limit=args.limit, title=f"{args.plan} on {args.graph}"))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m remat.torch",
                                     description="remat tools for PyTorch models")
    commands = parser.add_subparsers(dest="command", required=True)
    trace_parser = commands.add_parser("trace", help="write a model's training step as a graph")
    trace_parser.add_argument("model", help="torchvision:NAME, FILE.py:FUNCTION or module:FUNCTION")
    trace_parser.add_argument("-o", "--output", required=True, help="remat-graph JSON to write")
    trace_parser.add_argument("--batch", type=int, default=8, help="batch size (default 8)")
    trace_parser.add_argument("--image-size", type=int, default=224,
                              help="torchvision models: image height and width (default 224)")
    trace_parser.add_argument("--num-classes", type=int, default=1000,
                              help="torchvision models: classes (default 1000)")
    trace_parser.add_argument("--cost", choices=("flops", "measure", "roofline"),
                              default="flops",
                              help="node cost: FLOP model, measured microseconds, or the "
                              "microseconds of the roofline model (arithmetic or bytes moved)")
    trace_parser.add_argument("--name", default=None, help="graph name (default: model class)")
    summary_parser = commands.add_parser("summary", help="what a plan recomputes and keeps")
    summary_parser.add_argument("graph", help="remat-graph JSON")
    summary_parser.add_argument("plan", help="remat-plan JSON (remat solve -o, step.save_plan)")
    summary_parser.add_argument("--limit", type=int, default=15, help="rows per table")
    args = parser.parse_args(argv)
    if args.command == "summary":
        try:
            _summary_command(args)
        except (ValueError, OSError) as error:
            print(f"remat: error: {error}", file=sys.stderr)
            return 2
        return 0
    if args.batch < 1:
        parser.error(f"--batch must be >= 1 (got {args.batch})")
    try:
        _trace_command(args)
    except (ValueError, OSError) as error:
        print(f"remat: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
