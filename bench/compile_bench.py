"""torch.compile training steps side by side: eager, Inductor with PyTorch's default partition,
Inductor with PyTorch's activation_memory_budget (each of its knapsack solvers), and Inductor
with remat's backend (several solvers), at the same budget fractions, in one run.

    ./scripts/python bench/compile_bench.py                       # all models, the table
    ./scripts/python bench/compile_bench.py --models gpt --fractions 0.5 --solvers fastsa
    ./scripts/python bench/compile_bench.py --models hf-gpt2,resnet50 --compiler eager --append

Per model and configuration: saved activation bytes and recomputed FLOPs of the partition (summed
over the graphs; cost.py's FLOP model on both sides), the measured peak of one training step
(forward and backward, gradients set to None before it, so the gradients' storage counts too), the
median step time of the steps after the compiled one, the compile time, wall and CPU seconds (the
first step, with an empty kernel cache: each row compiles its own kernels, on CPU one at a time, the
CPU seconds those of this process and its compiler runs; each model's rows follow one compiled step
that is not counted, so the process's one-time costs land on no row), the partition time (summed
over the graphs: "partition s" the wall seconds of the partition function itself, "partition CPU s"
the CPU seconds of the whole partitioner call, for remat's backend PyTorch's default partition it
plans against and the check of its plan against it included), and the largest difference in the loss
and the gradients from eager, from PyTorch's default partition and from eager in float64 (the same
step with the model and batch in double precision: what every row approximates). Inductor's
decompositions and kernels change the float32 rounding (batch norm's, and a convolution's in
channels-last layout, which Inductor's layout optimization picks; a "no layout optimization" row's
graphs run in their own layouts), and a badly conditioned step magnifies it (ResNet-50 at batch
8: its last stage's batch norms reduce over 32 values per channel): two rows may differ from each
other as much as each differs from eager while both are as near the float64 step as eager's own
float32 step is. "vs fp64 eager" tells a different rounding from a wrong gradient: a wrong one
stands far above the eager row's figure there. "sim MB" is the activation memory of the partition in
remat's simulator, the same model for both partitioners (partition.simulate_partition: the graphs'
calls in their order, each graph's fusible chains fused, summed over the graphs; under Inductor,
with the channels-last copies its layout optimization makes, as remat's plans count them, for
every row but the "no layout optimization" ones, whose graphs compile without it, and with
Inductor's reuse of buffers: outputs written in place of buffers read last, freed buffers kept
for later ones of their size, inductor_buffers), and "sim %" its
share of the default schedule's activation memory (what remat's fraction is of). "random redrawn"
counts the random calls a partition runs again in the backward: PyTorch's budget knapsack may
recompute a dropout, which here (fallback_random, CPU) draws a new mask, so its gradients are not
eager's; remat's plans never do (a random call they run again replays its first draw from the
generator state the forward saved: partition.py, counted in the plan's memory). A PyTorch budget
plan that redraws is followed by the same solver's plan with random calls saved ("pytorch budget
greedy, random saved": PyTorch's MUST_SAVE tag on them, _compat.min_cut_partition), the plan under
remat's rule. With --equal-peak-solver (default auto), each fraction's rows end with remat planning
each graph to the simulated bytes a PyTorch budget plan reached there ("remat auto at greedy's
sim"): at equal memory, who recomputes less. After the table, per model and fraction: does a remat
row dominate PyTorch's best budget plan (the least measured peak, then the fewest recomputed FLOPs)
and its best plan drawing no random call again, on the measured peak (and in remat's simulator) and
recomputed FLOPs both?

Both sides' recomputed FLOPs are cost.py's model (matmuls and convolutions from shapes, a
pointwise or reduction call its element count), summed over the calls each backward runs again.
remat's solvers minimize that model's FLOPs of their steps (a fused chain charged whole), and
the partition keeps, of its candidate plans, the one whose lowered graphs run the fewest FLOPs;
PyTorch's knapsack minimizes its own runtime estimate (activation_memory_budget_runtime_estimator,
"flops" by default: torch.utils.flop_counter's, where a pointwise call counts 1), so it recomputes
pointwise chains as if free; this table charges both by cost.py.

With --compiler eager every configuration runs its partitioned graphs as fx modules (Inductor's
decompositions, no Inductor compile): plans, recomputed FLOPs and gradients are the same as with
Inductor, the peak is that of unfused execution, and the compile time is tracing and partitioning
only; it is the fast mode for the larger models.

The peak is CPU live-storage accounting, the same for every configuration: the allocator's
events from torch.profiler (profile_memory=True) while the step runs, each allocation adding its
bytes and its free removing them, Inductor's buffers included; storages older than the step (the
last step's gradients, which it sets to None) and their frees are not counted
(remat.torch.measured_peak_bytes). Inductor's caches are off, so every
configuration partitions and compiles; random ops run eager's kernels
(torch._inductor.config.fallback_random), so dropout draws as eager does and the gradients of
every configuration are comparable with eager's. (A PyTorch budget plan that recomputes a
dropout then draws a new mask in the backward: its gradients differ from eager's. remat never
draws again; its backward makes a dropout's output from the saved mask.)

A fraction means different things to the two: PyTorch's activation_memory_budget is the share
of the default partition's saved bytes to keep (between saving everything it would and
recomputing every recomputable op); remat's is the share of the step's activation memory (the
simulated peak of the default schedule less parameters, buffers and batch; docs/python.md).
The measured peak is what both are judged by. Figures go to bench/results/compile_bench.json
(--out) and the table to compile_bench.md beside it (--append adds a run to both); a JSON row
also holds `replayed`, the random calls the partition runs again by replaying their first draw
(remat's plans; the table's "random redrawn" counts the others).
"""

import argparse
import copy
import json
import os
import resource
import statistics
import sys
import time
import warnings

import torch
import torch.nn as nn
from torch._inductor.utils import fresh_cache

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))

import bench_results  # noqa: E402
import remat.torch as rt  # noqa: E402
from remat.torch import _compat  # noqa: E402
from remat.torch.compile import CompileBackend, RematPartitioner  # noqa: E402
from remat.torch.partition import partition_stats, simulate_partition  # noqa: E402

TORCH_SOLVERS = ("greedy", "ilp", "dp")
# The label's tail of a PyTorch budget plan with random calls marked as ones it must save.
SAVED_RANDOM = ", random saved"


def gpt():
    import train_gpt

    return train_gpt.make(4, context=64, vocab=128, layers=2)


class HFLoss(nn.Module):
    """A Hugging Face causal LM called with input_ids and labels; returns the loss."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, labels=ids).loss


def hf(name):
    import transformers

    common = {"vocab_size": 128, "bos_token_id": 0, "eos_token_id": 0, "use_cache": False}
    if name == "gpt2":
        config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=64,
                                         **common)
        cls = transformers.GPT2LMHeadModel
    else:
        config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64,
                                          intermediate_size=128, num_attention_heads=2,
                                          num_key_value_heads=1, max_position_embeddings=64,
                                          **common)
        cls = transformers.LlamaForCausalLM
    torch.manual_seed(0)
    ids = torch.randint(0, 128, (4, 64), generator=torch.Generator().manual_seed(0))
    return HFLoss(cls(config)), (ids,), None


def vision(name, image, batch=2):
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(num_classes=10, **(
        {"image_size": image} if name.startswith("vit") else {}))
    inputs = (torch.randn(batch, 3, image, image), torch.randint(0, 10, (batch,)))
    return model, inputs, nn.functional.cross_entropy


MODELS = {
    "gpt": gpt,
    "hf-gpt2": lambda: hf("gpt2"),
    "hf-llama": lambda: hf("llama"),
    # Batch 8: at 2 the weights' gradients (which no plan can drop) are nearly all the memory.
    "resnet50": lambda: vision("resnet50", 64, batch=8),
    "vit_b_16": lambda: vision("vit_b_16", 64),
}


class RecordingPartition:
    """PyTorch's min-cut partition as an Inductor custom partitioner (the call Inductor makes
    without one), recording each graph's figures; with `save_random`, random calls are ones it
    must save (_compat.min_cut_partition)."""

    def __init__(self, label, save_random=False, layout_copies=False, buffer_reuse=False):
        self.label, self.graphs, self.save_random = label, [], save_random
        # Inductor compiles with its layout optimization on (its heuristics decide per graph)
        self.layout_copies = layout_copies
        self.buffer_reuse = buffer_reuse  # Inductor compiles the graphs: simulate_partition's

    def __call__(self, joint, inputs, **kwargs):
        start, cpu_start = time.perf_counter(), time.process_time()
        fw, bw = _compat.min_cut_partition(joint, inputs, save_random=self.save_random, **kwargs)
        stats = partition_stats(fw, bw, kwargs["num_fwd_outputs"], time.perf_counter() - start)
        stats.cpu_seconds = time.process_time() - cpu_start
        copies = self.layout_copies and _compat.optimizes_layout(fw)
        self.graphs.append(simulated(stats, joint, fw, bw, kwargs["num_fwd_outputs"], copies,
                                     self.buffer_reuse))
        return fw, bw

    def uuid(self):
        return self.label


class SimulatingPartition(RematPartitioner):
    """remat's partition function, recording the simulator's figures of each partition as
    RecordingPartition does; with `budgets`, graph i gets budgets[i] bytes of activation memory
    (the figure another partition reached on it)."""

    def __init__(self, budget, solver, budgets=None, **options):
        super().__init__(budget, solver, **options)
        self.budgets = budgets

    def __call__(self, joint, inputs=None, **kwargs):
        cpu_start = time.process_time()
        fw, bw = super().__call__(joint, inputs, **kwargs)
        # All of the backend's partitioning: PyTorch's default partition it plans against, its
        # plan and the check of one against the other.
        self.graphs[-1].cpu_seconds = time.process_time() - cpu_start
        simulated(self.graphs[-1], joint, fw, bw, kwargs["num_fwd_outputs"],
                  self.graphs[-1].layout_copies, self.buffer_reuse)
        return fw, bw

    def _share(self, frame):
        if self.budgets is None:
            return super()._share(frame)
        return self.budgets[len(self.graphs)]


def simulated(stats, joint, fw, bw, num_fwd_outputs, layout_copies=False, buffer_reuse=False):
    """`stats` with the simulator's activation bytes of the partition and the default
    schedule's (None where the simulator cannot follow it); with `layout_copies`, of the graphs
    compiled with Inductor's layout optimization, with `buffer_reuse`, with Inductor's reuse of
    buffers (simulate_partition)."""
    try:
        figures = simulate_partition(joint, fw, bw, num_fwd_outputs,
                                     layout_copies=layout_copies, buffer_reuse=buffer_reuse)
        stats.simulated_activation_bytes = figures.activation_bytes
        stats.baseline_activation_bytes = figures.baseline_activation_bytes
    except ValueError as e:
        print(f"  (simulator: {e})", flush=True)
        stats.simulated_activation_bytes = stats.baseline_activation_bytes = None
    return stats


def remat_backend(fraction, solver, compiler, budgets=None, layout_optimization=None):
    partitioner = SimulatingPartition(fraction, solver, budgets)
    return CompileBackend(partitioner, compiler, layout_optimization=layout_optimization)


def configurations(fractions, solvers, compiler="inductor", equal_peak_solver=None,
                   reached=None, torch_solvers=TORCH_SOLVERS, without_layout_optimization=False):
    """(label, fraction, backend maker, functorch config) of every configuration; with compiler
    "eager" the partitioned graphs run as fx modules (AOTAutograd with Inductor's decompositions,
    as "aot_eager_decomp_partition"), for every configuration alike. `reached`: label -> fraction
    -> the row measured (filled in as the rows run). A PyTorch budget plan that runs a random
    call again is followed by the same solver's plan with random calls saved (SAVED_RANDOM). With
    `equal_peak_solver`, after each fraction's rows, one more remat row per distinct figure
    PyTorch's budget plans reached at that fraction (the simulated activation bytes of each
    graph), with that figure as each graph's budget. `torch_solvers`: PyTorch's budget solvers
    with rows (none: eager, the default partition and remat's rows only). Under Inductor every
    graph but a "no layout optimization" row's compiles with its layout optimization, as Inductor
    does by default (remat's backend too: compile_backend's layout_optimization=None).
    `without_layout_optimization`: each remat row is followed by the same solver's with
    compile_backend(layout_optimization=False) ("remat SOLVER, no layout optimization")."""
    compile_graphs = graph_compiler(compiler)

    def torch_backend(label, save_random=False):
        layout_copies = _compat.compiles_with_layout_optimization(compiler)
        reuse = _compat.reuses_buffers(compiler)
        partitioner = RecordingPartition(label, save_random, layout_copies, reuse)
        backend = lambda gm, inputs: compile_graphs(gm, inputs, partitioner)  # noqa
        backend.graphs = partitioner.graphs
        return backend

    yield "eager", None, None, {}
    yield "pytorch default", None, lambda: torch_backend("default"), {}
    for f in fractions:
        for solver in torch_solvers:
            yield (f"pytorch budget {solver}", f, lambda s=solver, f=f: torch_backend(f"{s}{f}"),
                   {"activation_memory_budget": f, "activation_memory_budget_solver": solver})
        for solver in torch_solvers:
            if reached.get(f"pytorch budget {solver}", {}).get(f, {}).get("redrawn"):
                yield (f"pytorch budget {solver}{SAVED_RANDOM}", f,
                       lambda s=solver, f=f: torch_backend(f"{s}{f}-saved-random", True),
                       {"activation_memory_budget": f, "activation_memory_budget_solver": solver})
        for solver in solvers:
            yield (f"remat {solver}", f, lambda s=solver, f=f: remat_backend(f, s, compiler), {})
            if without_layout_optimization:
                yield (f"remat {solver}, no layout optimization", f,
                       lambda s=solver, f=f: remat_backend(f, s, compiler,
                                                           layout_optimization=False), {})
        if equal_peak_solver is None:
            continue
        peers = {}  # budgets -> the PyTorch solvers whose plans reached them
        for solver in torch_solvers:
            for variant in ("", SAVED_RANDOM):
                row = reached.get(f"pytorch budget {solver}{variant}", {}).get(f)
                budgets = row and row["simulated_bytes"]
                if budgets and None not in budgets:
                    peers.setdefault(tuple(budgets), {}).setdefault(variant, []).append(solver)
        for budgets, by_variant in peers.items():
            names = "; ".join("/".join(solvers) + variant
                              for variant, solvers in by_variant.items())
            yield (f"remat {equal_peak_solver} at {names}'s sim", f,
                   lambda b=list(budgets): remat_backend(1.0, equal_peak_solver, compiler, b), {})


def step_fn(model, batch, loss_fn, backend):
    def step(*b):
        out = model(b[0])
        return out if loss_fn is None else loss_fn(out, *b[1:])

    return step if backend is None else torch.compile(step, backend=backend)


def train_step_fn(model, batch, step):
    """A training step of `model` through compiled `step`: gradients cleared, the same seed
    each time (the rows draw the same dropouts), backward run; returns the detached loss."""

    def train_step():
        model.zero_grad(set_to_none=True)
        torch.manual_seed(11)
        loss = step(*batch)
        loss.backward()
        return loss.detach()

    return train_step


def listed(p, option, text, known, noun):
    """The comma-separated names `text` of `option`, each one of `known`; else the parser `p`'s
    error (exit 2) naming the first `noun` that is not."""
    names = text.split(",")
    unknown = [n for n in names if n not in known]
    if unknown:
        p.error(f"{option}: unknown {noun} {unknown[0]!r} (known: {', '.join(known)})")
    return names


def fractions_of(p, text):
    """The comma-separated numbers of --fractions `text`; else the parser `p`'s error."""
    try:
        return [float(f) for f in text.split(",")]
    except ValueError:
        p.error(f"--fractions: {text!r} is not a comma-separated list of numbers")


def cpu_seconds():
    """CPU seconds of this process and of its children waited for (the C++ compiler runs that
    build Inductor's CPU kernels)."""
    own, children = (resource.getrusage(who)
                     for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(make, backend_maker, functorch_config, steps, device="cpu"):
    model, batch, loss_fn = make()
    model = copy.deepcopy(model).train().to(device)
    batch = tuple(x.to(device) for x in batch)
    torch._dynamo.reset()
    backend = backend_maker() if backend_maker else None
    train_step = train_step_fn(model, batch, step_fn(model, batch, loss_fn, backend))

    # An empty kernel cache for each row: every row compiles its kernels (C++ for Inductor),
    # none reuses those an earlier row or run compiled.
    with fresh_cache():
        start, cpu_start = time.perf_counter(), cpu_seconds()
        with torch._functorch.config.patch(functorch_config):
            loss = train_step()
        compile_s = time.perf_counter() - start
        compile_cpu_s = cpu_seconds() - cpu_start
        grads = [p.grad.clone() for p in model.parameters()]
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            train_step()
            synchronize(device)
            times.append(time.perf_counter() - start)
        peak = step_peak_bytes(train_step, device)
    graphs = getattr(backend, "graphs", [])
    return {
        "loss": loss, "grads": grads, "peak_bytes": peak,
        "step_s": statistics.median(times), "compile_s": compile_s,
        "compile_cpu_s": compile_cpu_s,
        "saved_bytes": sum(g.saved_bytes for g in graphs) if graphs else None,
        "recomputed_flops": sum(g.recomputed_flops for g in graphs) if graphs else None,
        "redrawn": sum(g.redrawn for g in graphs) if graphs else None,
        "replayed": sum(g.replayed for g in graphs) if graphs else None,
        "partition_s": sum(g.seconds for g in graphs) if graphs else None,
        "partition_cpu_s": sum(g.cpu_seconds for g in graphs) if graphs else None,
        "simulated_bytes": [getattr(g, "simulated_activation_bytes", None) for g in graphs],
        "simulated_baseline_bytes": [getattr(g, "baseline_activation_bytes", None) for g in graphs],
        "graphs": len(graphs),
        "plan": [{"solver": g.solver, "status": g.status, "budget_bytes": g.budget_bytes,
                  "planned_activation_bytes": g.planned_activation_bytes,
                  "baseline_activation_bytes": g.baseline_activation_bytes}
                 for g in graphs if g.solver],
    }


def synchronize(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def step_peak_bytes(train_step, device):
    """The peak bytes allocated while one training step runs above those allocated when it
    starts: CPU live-storage accounting, or on a GPU torch.cuda's max_memory_allocated."""
    if torch.device(device).type != "cuda":
        return rt.measured_peak_bytes(train_step)[1]
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    train_step()
    synchronize(device)
    return torch.cuda.max_memory_allocated(device) - start


def warm_up(make, compiler, device):
    """One compiled step with PyTorch's default partition, its figures dropped: the process's
    one-time costs (Inductor's imports, its compile workers) would otherwise land on whichever
    row compiles first, the default's."""
    compile_graphs = graph_compiler(compiler)
    partitioner = RecordingPartition("warm-up")
    measure(make, lambda: lambda gm, inputs: compile_graphs(gm, inputs, partitioner), {}, 1,
            device)


def graph_compiler(compiler):
    """compile(gm, example inputs, partition function) of `compiler` ("inductor" or "eager")."""
    return _compat.inductor_compile if compiler == "inductor" else _compat.aot_eager_compile


def difference(row, eager):
    """The largest absolute difference of the loss and the gradients, in float64."""
    loss = abs(row["loss"].double() - eager["loss"].double()).item()
    grads = max((a.double() - b.double()).abs().max().item()
                for a, b in zip(row["grads"], eager["grads"]))
    return max(loss, grads)


def float64_reference(make, device="cpu"):
    """Loss and gradients of one eager training step with the model and the batch's floating
    tensors in float64 (the same seed as every row's step; a dropout's mask drawn in float64 need
    not be float32's, so with dropout the reference is another step's)."""
    model, batch, loss_fn = make()
    model = copy.deepcopy(model).train().to(device).double()
    batch = tuple(x.to(device).double() if x.is_floating_point() else x.to(device)
                  for x in batch)
    loss = train_step_fn(model, batch, step_fn(model, batch, loss_fn, None))()
    return {"loss": loss, "grads": [p.grad for p in model.parameters()]}


def simulated_figures(row):
    """(simulated activation MB, its share of the default schedule's) summed over the graphs,
    as table text ("-" where a graph's partition could not be simulated)."""
    sim = simulated_total(row)
    if sim is None:
        return "-", "-"
    return mb(sim), f"{100.0 * sim / sum(row['simulated_baseline_bytes']):.0f} %"


def simulated_total(row):
    """The simulated activation bytes of the row's partitions summed over its graphs; None where
    a graph's partition could not be simulated."""
    sim = row["simulated_bytes"]
    return None if not sim or None in sim else sum(sim)


def device_name(device):
    if torch.device(device).type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return device


def mb(x):
    return "-" if x is None else f"{x / 1e6:.2f}"


def main():
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--models", default="gpt,hf-gpt2,hf-llama,resnet50,vit_b_16")
    p.add_argument("--fractions", default="0.8,0.5,0.3,0.1")
    p.add_argument("--solvers", default="fastsa,auto", help="remat solvers")
    p.add_argument("--equal-peak-solver", default="auto",
                   help="remat solver planning each graph to the simulated activation memory "
                   "each PyTorch budget plan reached ('none': no such rows)")
    p.add_argument("--torch-solvers", default=",".join(TORCH_SOLVERS),
                   help="PyTorch's activation_memory_budget solvers with rows ('none': no such "
                   "rows, as when only remat's gradients or peak against the default's matter)")
    p.add_argument("--steps", type=int, default=3, help="timed steps after the compiled one")
    p.add_argument("--without-layout-optimization", action="store_true",
                   help="after each remat row, the same solver's plan compiled without "
                        "Inductor's layout optimization (compile_backend(layout_optimization="
                        "False); the other rows compile with it, as Inductor does by default)")
    p.add_argument("--compiler", choices=("inductor", "eager"), default="inductor",
                   help="eager: the graphs run as fx modules (fast: no Inductor compile; the "
                   "peak is then unfused execution's, compile time is tracing and partitioning)")
    p.add_argument("--device", default="cpu",
                   help="cpu, or cuda: the peak is then torch.cuda.max_memory_allocated over the "
                   "step above what is allocated when it starts")
    p.add_argument("--append", action="store_true",
                   help="add the rows to --out instead of replacing it (one file, several runs)")
    p.add_argument("--out", default=os.path.join(HERE, "results", "compile_bench.json"),
                   help="the rows as JSON; the table goes to the .md file of the same name")
    args = p.parse_args()
    if os.path.splitext(args.out)[1] == ".md":
        p.error(f"--out {args.out}: the rows' JSON file, whose .md twin gets the table (the "
                "table would overwrite the rows)")
    if args.without_layout_optimization and args.compiler != "inductor":
        p.error("--without-layout-optimization is about Inductor's layout optimization: it "
                "needs --compiler inductor")
    models = listed(p, "--models", args.models, MODELS, "model")
    fractions = fractions_of(p, args.fractions)
    solvers = args.solvers.split(",")
    torch_solvers = [] if args.torch_solvers == "none" else args.torch_solvers.split(",")
    if set(torch_solvers) - set(TORCH_SOLVERS):
        p.error(f"--torch-solvers: unknown solver in {args.torch_solvers!r} (known: "
                f"{', '.join(TORCH_SOLVERS)}, or none)")
    torch.set_num_threads(1)  # a shared machine: one core per run, comparable step times
    warnings.simplefilter("ignore")
    patches = {"fx_graph_cache": False, "fallback_random": True}
    if args.device == "cpu":
        # Inductor compiles kernels from this process (no worker pool, whose CPU seconds no row
        # could count): a row's compile CPU seconds are all of its compile's, while its wall
        # time on a shared machine is also the load's. A lent GPU machine's time is short and
        # its cores many: there the pool compiles, and the CPU seconds leave out its workers'.
        patches["compile_threads"] = 1
    records = []
    lines = [f"compiler {args.compiler}, torch {torch.__version__}, one thread, device "
             f"{device_name(args.device)}", "",
             "| model | configuration | fraction | saved MB | recomputed MFLOP | random redrawn "
             "| sim MB | sim % | measured peak MB | peak / default | step ms | compile s "
             "| compile CPU s | partition s | partition CPU s | max diff vs eager | vs default "
             "| vs fp64 eager |",
             "|" + " --- |" * 18]
    print("\n".join(lines), flush=True)
    equal_peak = None if args.equal_peak_solver == "none" else args.equal_peak_solver
    with torch._inductor.config.patch(patches), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        for name in models:
            warm_up(MODELS[name], args.compiler, args.device)
            reference = float64_reference(MODELS[name], args.device)
            eager = default = None
            reached = {}
            for label, fraction, maker, config in configurations(
                    fractions, solvers, args.compiler, equal_peak, reached, torch_solvers,
                    args.without_layout_optimization):
                row = measure(MODELS[name], maker, config, args.steps, args.device)
                reached.setdefault(label, {})[fraction] = row
                eager = eager or row
                if label == "pytorch default":
                    default = row
                ratio = row["peak_bytes"] / default["peak_bytes"] if default else None
                diff = difference(row, eager)
                diff_default = None if default is None else difference(row, default)
                diff_fp64 = difference(row, reference)
                flops = (None if row["recomputed_flops"] is None
                         else f"{row['recomputed_flops'] / 1e6:.1f}")
                plan_s = "-" if row["partition_s"] is None else f"{row['partition_s']:.1f}"
                plan_cpu_s = ("-" if row["partition_cpu_s"] is None
                              else f"{row['partition_cpu_s']:.1f}")
                sim, share = simulated_figures(row)
                fell_back = sum(p["status"].startswith("fallback") for p in row["plan"])
                shown = label + (f" (fell back: {fell_back} of {row['graphs']} graphs)"
                                 if fell_back else "")
                lines.append(f"| {name} | {shown} | {fraction or '-'} | "
                             f"{mb(row['saved_bytes'])} | {flops or '-'} | "
                             f"{'-' if row['redrawn'] is None else row['redrawn']} | {sim} | "
                             f"{share} | "
                             f"{mb(row['peak_bytes'])} | "
                             f"{'-' if ratio is None else f'{ratio:.2f}'} | "
                             f"{1e3 * row['step_s']:.1f} | {row['compile_s']:.1f} | "
                             f"{row['compile_cpu_s']:.1f} | {plan_s} | {plan_cpu_s} | "
                             f"{diff:.1e} | "
                             f"{'-' if diff_default is None else f'{diff_default:.1e}'} | "
                             f"{diff_fp64:.1e} |")
                print(lines[-1], flush=True)
                records.append({"model": name, "configuration": label, "fraction": fraction,
                                "compiler": args.compiler, "max_diff_vs_eager": diff,
                                "max_diff_vs_default": diff_default,
                                "max_diff_vs_fp64_eager": diff_fp64,
                                "peak_over_default": ratio,
                                **{k: v for k, v in row.items()
                                   if k not in ("loss", "grads")}})
    summary = dominance_summary(records)
    print("\n".join(summary), flush=True)
    lines += summary
    write_results(args.out, records, lines, args.append)


def dominance_summary(records):
    """Table lines: per model and fraction, PyTorch's best budget plan (the least measured peak,
    then the fewest recomputed FLOPs, of its solvers' plans as it runs them) and whether a remat
    row (at the fraction, or at the simulated memory of a PyTorch plan) dominates it: a peak and
    recomputed FLOPs no higher, the peak measured, and in remat's simulator (one memory model for
    both; with --compiler eager the measured peak is that of unfused execution, which no plan of
    fused chains is made for). The same for its best plan that draws no random call again (the
    plans with random calls saved included), the rule remat's plans follow."""
    lines = ["", "Does remat dominate PyTorch's best budget plan (peak and recomputed FLOPs both "
             "no higher; measured peak, and remat's simulator's)?", "",
             "| model | fraction | PyTorch's best budget plan | dominated by | its best plan "
             "drawing no random call again | dominated by |", "|" + " --- |" * 6]
    fractions = {}
    for r in records:
        if r["fraction"] is not None and r["recomputed_flops"] is not None:
            fractions.setdefault((r["model"], r["fraction"]), []).append(r)
    for (model, fraction), rows in fractions.items():
        theirs = [r for r in rows if r["configuration"].startswith("pytorch budget")]
        ours = [r for r in rows if r["configuration"].startswith("remat")]
        if not theirs or not ours:
            continue
        as_run = [r for r in theirs if not r["configuration"].endswith(SAVED_RANDOM)]
        cells = []
        for peers in (as_run, [r for r in theirs if not r["redrawn"]]):
            if not peers:
                cells += ["-", "-"]
                continue
            best = min(peers, key=lambda r: (r["peak_bytes"], r["recomputed_flops"]))
            cells.append(f"{row_figures(best)} ({best['configuration'][len('pytorch budget '):]})")
            cells.append("; ".join(dominated_by(ours, best, figure)
                                   for figure in ("peak_bytes", "sim")))
        lines.append(f"| {model} | {fraction} | " + " | ".join(cells) + " |")
    return lines


def dominated_by(ours, best, figure):
    """"measured: yes (the remat row dominating `best`)" or "no" with the closest row, on the
    measured peak or (figure "sim") the simulated one."""
    def peak(r):
        if figure == "peak_bytes":
            return r["peak_bytes"]
        sim = simulated_total(r)
        return float("inf") if sim is None else sim

    name = "measured" if figure == "peak_bytes" else "sim"
    rows = [r for r in ours if peak(r) <= peak(best)]
    dominating = [r for r in rows if r["recomputed_flops"] <= best["recomputed_flops"]]
    if dominating:
        r = min(dominating, key=lambda r: (r["recomputed_flops"], peak(r)))
        return f"{name}: yes, {r['configuration']} ({mb(peak(r))} MB, " \
            f"{r['recomputed_flops'] / 1e6:.1f} MFLOP)"
    if not rows:
        return f"{name}: no (no remat row at its peak)"
    r = min(rows, key=lambda r: r["recomputed_flops"])
    return f"{name}: no (at its peak: {r['configuration']}, {mb(peak(r))} MB, " \
        f"{r['recomputed_flops'] / 1e6:.1f} MFLOP)"


def row_figures(r):
    redrawn = f", {r['redrawn']} random redrawn" if r["redrawn"] else ""
    sim = simulated_total(r)
    sim = "" if sim is None else f" (sim {mb(sim)})"
    return f"{mb(r['peak_bytes'])} MB{sim}, {r['recomputed_flops'] / 1e6:.1f} MFLOP{redrawn}"


def write_results(out, records, lines, append):
    """The rows to `out` (JSON) and the table to its .md twin; with `append`, after theirs."""
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    table = os.path.splitext(out)[0] + ".md"
    if append and os.path.exists(out):
        with open(out) as f:
            records = json.load(f)["rows"] + records
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "threads": 1, "rows": records}, f, indent=1)
    with open(table, "a" if append else "w") as f:
        f.write("\n" + bench_results.provenance() if append else bench_results.header(
            "compile_bench"))
        f.write("\n" + "\n".join(lines) + "\n")
    print(f"wrote {out} and {table}")


if __name__ == "__main__":
    main()
