"""Planning at scale: models far larger than this machine, traced on fake tensors and planned.

    ./scripts/python bench/scale_bench.py [--models llama-7b,unet] [--budgets 50%,25%,min]
                                          [--solver auto] [--work-limit 60]
                                          [--compare rockmate,fastsa] [--results [FILE]]

The model zoo is generated here from configs (nothing is downloaded), every model on the meta
device, and traced with remat.torch.trace(..., device="cpu"): fake tensors, no memory of the
model's size. The graphs are those of the CPU kernels (a CUDA graph needs a GPU here to pick its
attention kernels); their sizes are the step's bytes by dtype.
- llama-1b: TinyLlama-1.1B's shape (22 layers, d 2048, grouped-query attention), seq 2048, batch 8
- llama-7b: Llama-2-7B's shape (32 layers, d 4096), seq 2048, batch 1 (test_plan_for.py's model
  at full depth)
- llama-7b-8k: the same at seq 8192, batch 2
- llama-13b: Llama-2-13B's shape (40 layers, d 5120), seq 4096, batch 1
- gpt2-xl: GPT-2 XL (48 layers, d 1600), seq 1024, batch 8
- vit-h: ViT-H/14 (torchvision's vit_h_14, 32 layers, d 1280), 224 x 224, batch 32
- unet: a U-Net written here (Ronneberger et al.: 4 levels, 64 to 1024 channels), 512 x 512,
  batch 8, fp32
Language models and the ViT are bf16 (parameters and activations; the loss in fp32).

Per model (each in its own process): nodes, trace CPU seconds, the baseline peak and the memory
lower bound, and the baseline split (parameters, gradients, AdamW state with fp32 master
weights, activations); per budget (a fraction of the baseline peak, or "min": the memory lower
bound): the planning CPU seconds, the planned peak (simulator), CI (extra compute over the
baseline, %), the solver that won (auto's winner) and the planner's peak RSS while it solved
(VmHWM, reset before each solve; the process holds PyTorch and the graph too). A budget below the
memory lower bound is not solved. Each solve stops on its work limit (the same plan on a loaded machine; the
wall clock is only the backstop). --compare runs those solvers alone at the same work limit too,
each in a column of its CI (the peak when over budget): `auto` should be no worse than any of
them. Figures go to stdout; --results writes them to bench/results/scale_bench.md (or the file
given) as well.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_results  # noqa: E402 (bench/, beside this file)

MODELS = ("llama-1b", "llama-7b", "llama-7b-8k", "llama-13b", "gpt2-xl", "vit-h", "unet")

GB = 1e9


# -- the zoo --------------------------------------------------------------------------------------

def _llama(layers, d, intermediate, heads, kv_heads, seq, batch):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=d, intermediate_size=intermediate,
                         num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=kv_heads, vocab_size=32000,
                         max_position_embeddings=seq)
    with torch.device("meta"):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    ids = torch.empty(batch, seq, dtype=torch.long, device="meta")
    return model, (ids, ids), _causal_lm_loss


def _causal_lm_loss(output, labels):
    import torch.nn.functional as F

    return F.cross_entropy(output.logits.flatten(0, 1).float(), labels.flatten())


def _gpt2_xl(seq=1024, batch=8):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_embd=1600, n_layer=48, n_head=25, n_positions=seq)
    with torch.device("meta"):
        model = GPT2LMHeadModel(config).to(torch.bfloat16)
    ids = torch.empty(batch, seq, dtype=torch.long, device="meta")
    return model, (ids, ids), _causal_lm_loss


def _vit_h(batch=32):
    import torch
    import torch.nn.functional as F
    import torchvision

    with torch.device("meta"):
        model = torchvision.models.vit_h_14(weights=None, image_size=224).to(torch.bfloat16)
    images = torch.empty(batch, 3, 224, 224, dtype=torch.bfloat16, device="meta")
    labels = torch.empty(batch, dtype=torch.long, device="meta")
    return model, (images, labels), lambda out, y: F.cross_entropy(out.float(), y)


def _unet(batch=8, side=512):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def double_conv(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout),
                             nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, padding=1),
                             nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(self, widths=(64, 128, 256, 512, 1024)):
            super().__init__()
            self.down = nn.ModuleList([double_conv(3, widths[0])] + [
                double_conv(a, b) for a, b in zip(widths, widths[1:])])
            self.up = nn.ModuleList([nn.ConvTranspose2d(b, a, 2, stride=2)
                                     for a, b in zip(widths, widths[1:])])
            self.merge = nn.ModuleList([double_conv(2 * a, a) for a in widths[:-1]])
            self.head = nn.Conv2d(widths[0], 1, 1)

        def forward(self, x):
            skips = []
            for i, block in enumerate(self.down):
                x = block(x if i == 0 else F.max_pool2d(x, 2))
                skips.append(x)
            x = skips.pop()
            for up, merge in zip(reversed(self.up), reversed(self.merge)):
                x = merge(torch.cat([skips.pop(), up(x)], dim=1))
            return self.head(x)

    with torch.device("meta"):
        model = UNet()
    images = torch.empty(batch, 3, side, side, device="meta")
    masks = torch.empty(batch, 1, side, side, device="meta")
    return model, (images, masks), F.mse_loss


def build(name):
    return {
        "llama-1b": lambda: _llama(22, 2048, 5632, 32, 4, seq=2048, batch=8),
        "llama-7b": lambda: _llama(32, 4096, 11008, 32, 32, seq=2048, batch=1),
        "llama-7b-8k": lambda: _llama(32, 4096, 11008, 32, 32, seq=8192, batch=2),
        "llama-13b": lambda: _llama(40, 5120, 13824, 40, 40, seq=4096, batch=1),
        "gpt2-xl": _gpt2_xl,
        "vit-h": _vit_h,
        "unet": _unet,
    }[name]()


# -- one model, in its own process ---------------------------------------------------------------

def _reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
    except OSError:
        pass


def _peak_rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return -1


def _cell(g, base_cost, budget_bytes, r):
    import remat

    evaluation = remat.simulate(g, list(r.sequence))
    assert evaluation.valid, evaluation.error
    if evaluation.peak_bytes > budget_bytes:
        return f"over ({evaluation.peak_bytes / GB:.2f} GB)"
    return f"{100.0 * (evaluation.cost - base_cost) / base_cost:+.2f}"


def measure_one(name, budgets, solver, work_limit, compare):
    import remat
    import remat.torch as rt

    model, batch, loss_fn = build(name)
    start = time.process_time()
    traced = rt.trace(model, batch, loss_fn, device="cpu", name=name)
    trace_s = time.process_time() - start
    g = traced.graph
    base_peak, base_cost = remat.baseline(g)
    lower = remat.memory_lower_bound(g)
    split = rt.memory_split(traced, optimizer="adamw")
    row = {"model": name, "nodes": g.num_nodes, "trace_s": trace_s, "trace_rss": _peak_rss(),
           "baseline_peak": base_peak, "lower_bound": lower,
           "parameters": split.parameters, "gradients": split.gradients,
           "optimizer_state": split.optimizer_state, "master_weights": split.master_weights,
           "activations": split.activations, "temporaries": split.temporaries,
           "batch": split.batch + split.fixed, "params_numel":
           sum(p.numel() for p in model.parameters()), "plans": []}
    for budget in budgets:
        budget_bytes = remat.parse_budget(g, budget)
        plan = {"budget": budget, "budget_bytes": budget_bytes}
        if budget_bytes < lower:
            plan["status"] = "below the lower bound"
            row["plans"].append(plan)
            continue
        _reset_peak_rss()
        start = time.process_time()
        r = remat.solve(g, budget_bytes, solver, work_limit=work_limit)
        plan["plan_s"] = time.process_time() - start
        plan["wall_s"] = r.wall_time_s
        plan["planner_rss"] = _peak_rss()
        evaluation = remat.simulate(g, list(r.sequence))
        assert evaluation.valid, evaluation.error
        plan.update(status=r.status, stop_reason=r.stop_reason, peak=evaluation.peak_bytes,
                    ci=100.0 * (evaluation.cost - base_cost) / base_cost,
                    winner=(dict(r.lists).get("auto_winner") or [r.solver])[0])
        plan["compare"] = {
            other: _cell(g, base_cost, budget_bytes,
                         remat.solve(g, budget_bytes, other, work_limit=work_limit))
            for other in compare}
        row["plans"].append(plan)
    return row


# -- the table ------------------------------------------------------------------------------------

def _gb(x):
    return f"{x / GB:.2f}"


def print_model(row):
    print(f"{row['model']}: {row['nodes']} nodes, {row['params_numel'] / 1e9:.2f} B parameters, "
          f"traced in {row['trace_s']:.1f} CPU s (peak RSS {_gb(row['trace_rss'])} GB); "
          f"baseline peak {_gb(row['baseline_peak'])} GB = parameters "
          f"{_gb(row['parameters'])} + gradients {_gb(row['gradients'])} + activations "
          f"{_gb(row['activations'])} + temporaries {_gb(row['temporaries'])} + batch and "
          f"buffers {_gb(row['batch'])}; AdamW adds {_gb(row['optimizer_state'])} (+ fp32 "
          f"master weights {_gb(row['master_weights'])}); memory lower bound "
          f"{_gb(row['lower_bound'])} GB "
          f"({100 * row['lower_bound'] / row['baseline_peak']:.1f} %)", flush=True)


def table(rows, compare):
    extra = "".join(f" {c} alone CI % |" for c in compare)
    lines = ["| model | nodes | trace s | budget | plan s (CPU) | peak GB | % of baseline | CI % "
             "| status | winner | planner RSS GB |" + extra,
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | --- | ---: |" +
             " ---: |" * len(compare)]
    for row in rows:
        for p in row["plans"]:
            if "peak" not in p:
                lines.append(f"| {row['model']} | {row['nodes']} | {row['trace_s']:.1f} | "
                             f"{p['budget']} ({_gb(p['budget_bytes'])} GB) | | | | | "
                             f"{p['status']} | | |" + " |" * len(compare))
                continue
            lines.append(
                f"| {row['model']} | {row['nodes']} | {row['trace_s']:.1f} | {p['budget']} "
                f"({_gb(p['budget_bytes'])} GB) | {p['plan_s']:.1f} | {_gb(p['peak'])} | "
                f"{100 * p['peak'] / row['baseline_peak']:.1f} | {p['ci']:+.2f} | {p['status']} "
                f"({p['stop_reason']}) | {p['winner']} | {_gb(p['planner_rss'])} |" +
                "".join(f" {p['compare'].get(c, '')} |" for c in compare))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--budgets", default="50%,25%,min")
    parser.add_argument("--solver", default="auto")
    parser.add_argument("--work-limit", type=float, default=60.0,
                        help="work units per solve (the default: about a CPU second each)")
    parser.add_argument("--compare", default="",
                        help="comma-separated solvers also run alone at each budget")
    parser.add_argument("--results", nargs="?", const=bench_results.default_path("scale_bench"),
                        help="also write the figures to this file (default: "
                        "bench/results/scale_bench.md)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # run one model, print its JSON row
    args = parser.parse_args()
    budgets = args.budgets.split(",")
    compare = [c for c in args.compare.split(",") if c]
    if args.one:
        print(json.dumps(measure_one(args.one, budgets, args.solver, args.work_limit, compare)))
        return
    names = args.models.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model {unknown[0]!r}; the zoo: {', '.join(MODELS)}")
    with bench_results.recorded("scale_bench", args.results):
        print(f"solver {args.solver}, work limit {args.work_limit:g} units per solve, one thread; "
              "graphs traced on fake tensors for the CPU\n")
        rows = []
        for name in names:
            run = subprocess.run([sys.executable, __file__, "--one", name, "--budgets",
                                  args.budgets, "--solver", args.solver, "--work-limit",
                                  str(args.work_limit), "--compare", args.compare],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{name}: failed\n{run.stderr[-2000:]}", flush=True)
                continue
            row = json.loads(run.stdout.strip().splitlines()[-1])
            print_model(row)
            print()
            rows.append(row)
        print(table(rows, compare))


if __name__ == "__main__":
    main()
