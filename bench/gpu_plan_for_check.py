"""A plan made without memory, run on a GPU: plan_for on a meta model, load_plan on the real one.

    python3 bench/gpu_plan_for_check.py [--batches 8,20] [--budgets 50%,56GB] [--costs auto,auto]
                                        [--layers 22] [--results FILE] [--device cuda]

The model is Hugging Face's Llama in TinyLlama-1.1B's shape (22 layers, d 2048, grouped-query
attention, bf16, sequence 2048), random weights. Each batch size has its budget and its cost model
(cost.py: "auto", the default, is "roofline" on CUDA, which prices memory-bound calls by their
bytes; "flops"). Per batch size:
1. `rt.plan_for` traces the step on fake tensors for the device and plans it (auto);
   `save_plan` writes the plan;
2. the real model is made on the device and `rt.load_plan` loads the plan (traced on fake
   tensors, so the default schedule is never run) and runs it: the measured peak (the step's
   inputs and what it allocates, torch.cuda.max_memory_allocated) against the planned peak (the
   simulator's), and the step time;
3. eager PyTorch runs the same step (loss.backward()): its measured peak, its step time and the
   largest difference of the loss and the gradients from remat's; or "out of memory" where the
   default schedule does not fit the device.
It needs a CUDA device for the graphs of CUDA's kernels; `--device cpu` with a small
`--layers`/`--hidden` runs the same steps here (a smoke test; the CPU peak is live-bytes
accounting). The table goes to stdout and to --results.
"""

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_results  # noqa: E402 (bench/, beside this file)

GB = 1e9


def add_model_arguments(parser, layers):
    """The Llama's shape: TinyLlama-1.1B's, with `layers` layers by default."""
    parser.add_argument("--layers", type=int, default=layers)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--intermediate", type=int, default=5632)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=2048)


def make_config(args):
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=args.hidden, intermediate_size=args.intermediate,
                       num_hidden_layers=args.layers, num_attention_heads=args.heads,
                       num_key_value_heads=args.kv_heads, vocab_size=32000,
                       max_position_embeddings=args.seq, use_cache=False)


def loss_fn(output, labels):
    import torch.nn.functional as F

    return F.cross_entropy(output.logits.flatten(0, 1).float(), labels.flatten())


def new_model(config, device):
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            return LlamaForCausalLM(config).train()
    finally:
        torch.set_default_dtype(previous)


def synchronize(device):
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def timed_steps(run, device, steps):
    """Median seconds of `steps` calls of run() after one warm-up call; run()'s last result."""
    result = run()
    times = []
    for _ in range(steps):
        synchronize(device)
        start = time.perf_counter()
        result = run()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2], result


def eager_peak_and_time(model, ids, device, steps):
    """(measured peak bytes, median step seconds, loss), counted as a Step counts its own: the
    step's inputs and what it allocates (-1 on the CPU); or None where the step runs out of
    device memory."""
    import torch

    def run():
        model.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.memory_allocated() if device == "cuda" else 0
        loss = loss_fn(model(ids), ids)
        loss.backward()
        synchronize(device)
        if device != "cuda":
            return loss.detach(), -1  # no allocator statistics on the CPU
        params = sum(p.numel() * p.element_size() for p in model.parameters())
        peak = torch.cuda.max_memory_allocated() - held
        return loss.detach(), peak + params + ids.numel() * ids.element_size()

    try:
        seconds, (loss, peak) = timed_steps(run, device, steps)
    except torch.OutOfMemoryError:
        model.zero_grad(set_to_none=True)
        return None
    return peak, seconds, loss


def check_batch(config, args, batch, budget, cost):
    import torch
    import remat.torch as rt

    row = {"batch": batch, "budget": budget, "cost": cost}
    with torch.device("meta"):
        meta_model = new_model(config, "meta")
    shapes = torch.empty(batch, args.seq, dtype=torch.long, device="meta")
    start = time.process_time()
    planned = rt.plan_for(meta_model, (shapes, shapes), loss_fn, budget=budget,
                          solver=args.solver, device=args.device, work_limit=args.work_limit,
                          cost=cost, progress=False)
    row.update(plan_cpu_s=time.process_time() - start, nodes=planned.traced.num_nodes,
               baseline=planned.baseline_peak_bytes, planned=planned.planned_peak_bytes,
               ci=planned.extra_cost_percent, status=planned.status)
    del meta_model
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "plan.json")
        planned.save_plan(path)
        model = new_model(config, args.device)
        ids = torch.randint(0, config.vocab_size, (batch, args.seq), device=args.device)
        start = time.process_time()
        step = rt.load_plan(model, (ids, ids), loss_fn, path, cost=cost)
        row["load_cpu_s"] = time.process_time() - start

    def remat_step():
        model.zero_grad(set_to_none=True)
        return step(ids, ids).detach()  # the first call (the warm-up) measures its peak

    row["remat_s"], remat_loss = timed_steps(remat_step, args.device, args.steps)
    row["measured"] = step.measured_peak_bytes
    grads = {n: p.grad for n, p in model.named_parameters()}
    eager = eager_peak_and_time(model, ids, args.device, args.steps)
    if eager is None:
        row["eager"] = None
    else:
        row["eager_peak"], row["eager_s"], eager_loss = eager
        row["eager"] = True
        row["loss_diff"] = (remat_loss.float() - eager_loss.float()).abs().item()
        row["grad_diff"] = max((grads[n].float() - p.grad.float()).abs().max().item()
                               for n, p in model.named_parameters() if p.grad is not None)
    del step, model, grads
    if args.device == "cuda":
        torch.cuda.empty_cache()
    return row


def line(row):
    cells = [str(row["batch"]), str(row["nodes"]), row["budget"], row["cost"],
             f"{row['baseline'] / GB:.2f}", f"{row['planned'] / GB:.2f}", f"{row['ci']:+.2f}",
             row["status"], f"{row['plan_cpu_s']:.1f}", f"{row['load_cpu_s']:.1f}",
             f"{row['measured'] / GB:.2f}", f"{row['measured'] / row['planned']:.3f}",
             f"{row['remat_s'] * 1e3:.0f}"]
    if row["eager"] is None:
        cells += ["out of memory", "-", "-", "-"]
    else:
        peak = row["eager_peak"]
        cells += [f"{peak / GB:.2f}" if peak >= 0 else "-", f"{row['eager_s'] * 1e3:.0f}",
                  f"{row['remat_s'] / row['eager_s']:.2f}",
                  f"{row['loss_diff']:.1e} / {row['grad_diff']:.1e}"]
    return "| " + " | ".join(cells) + " |"


HEADER = ("| batch | nodes | budget | cost | baseline GB | planned GB | CI % | status | plan CPU s "
          "| load CPU s | measured GB | measured / planned | remat step ms | eager peak GB "
          "| eager step ms | remat / eager | loss / grad diff |\n"
          "| ---: | ---: | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: "
          "| ---: | ---: | ---: | --- |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="8,20")
    parser.add_argument("--budgets", default="50%,56GB",
                        help="one budget per batch size (as optimize reads them)")
    add_model_arguments(parser, layers=22)
    parser.add_argument("--costs", help="one cost model per batch size: auto (default), flops, "
                        "roofline")
    parser.add_argument("--solver", default="auto")
    parser.add_argument("--work-limit", type=float, default=60)
    parser.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--results", nargs="?",
                        const=bench_results.default_path("gpu_plan_for_check"),
                        help="also write the table to this markdown file")
    args = parser.parse_args()
    import torch

    batches = [int(b) for b in args.batches.split(",")]
    budgets = args.budgets.split(",")
    costs = args.costs.split(",") if args.costs else ["auto"] * len(batches)
    if len(budgets) != len(batches) or len(costs) != len(batches):
        parser.error("--budgets and --costs need one entry per batch size")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda needs a CUDA device (--device cpu for a smoke test)")
    config = make_config(args)
    where = (torch.cuda.get_device_name() if args.device == "cuda" else "cpu")
    title = (f"Llama {args.layers} layers, d {args.hidden}, sequence {args.seq}, bf16, "
             f"solver {args.solver}, work limit {args.work_limit:g}; device {where}, "
             f"torch {torch.__version__}")
    with bench_results.recorded("gpu_plan_for_check", args.results):
        print(title + "\n")
        print(HEADER, flush=True)
        for batch, budget, cost in zip(batches, budgets, costs):
            try:
                print(line(check_batch(config, args, batch, budget, cost)), flush=True)
            except Exception as error:  # the next batch size still runs; the log says why
                print(f"| {batch} | failed: {type(error).__name__}: {str(error)[:300]} |",
                      flush=True)

if __name__ == "__main__":
    main()
