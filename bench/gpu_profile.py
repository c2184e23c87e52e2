"""Per-stage costs and memory of the built-in GPT on one GPU, replayed in the schedule simulator.

    .venv/bin/python bench/gpu_profile.py                 # on a CUDA machine; < 2 minutes
    .venv/bin/python bench/gpu_profile.py --device cpu --tiny   # a quick dry run anywhere

Prints one JSON object. What it does:

1. Builds the GPT split V-shape into ``2 * ranks`` stages on the one device (bf16 autocast on GPU,
   LayerNorm and loss in fp32, as the trainer runs it).
2. Measures per stage and micro-batch, median over ``--repeats`` after warm-up (CUDA events):
   F (forward, plus the loss on the last stage), B (full backward), I (backward to the stage input
   only) and W = B - I (stage 0 has no input gradient: I = 0, W = B, as torch runs it), and the
   activation memory one in-flight micro-batch holds (allocated bytes kept after F).
3. Replays, on those costs, the HyperFrame plan and torch's GPipe, 1F1B, Interleaved1F1B,
   InterleavedZeroBubble, ZBVZeroBubble and DualPipeV orders for ``ranks`` ranks and
   ``--microbatches`` micro-batches: makespan, ratio to LB_tight and peak activation memory.

p2p transfers are modelled as ``activation bytes / --p2p-gbps`` (0 = free).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.gpt import GPTStage, gpt_loss, synthetic_batch
from hyperframe_runtime.schedule.baselines import BASELINE_NAMES, baseline
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Placement, ScheduleError
from hyperframe_runtime.schedule.planner import plan
from hyperframe_runtime.schedule.simulate import lb_tight, simulate


def _timer(device: torch.device) -> Callable[[Callable[[], Any]], tuple[float, Any]]:
    def run(fn: Callable[[], Any]) -> tuple[float, Any]:
        if device.type == "cuda":
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            start.record()
            out = fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3, out
        t0 = time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, out

    return run


def _measure_stage(
    stage: GPTStage, x: torch.Tensor, targets: torch.Tensor, device: torch.device, repeats: int
) -> dict[str, float]:
    timed = _timer(device)
    params = [p for p in stage.parameters()]
    autocast = torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")

    def forward() -> torch.Tensor:
        with autocast:
            out = stage(x)
        return gpt_loss(out, targets) if stage.is_last else out

    samples: dict[str, list[float]] = {"F": [], "B": [], "I": [], "act": []}
    for i in range(repeats + 2):
        if device.type == "cuda":
            torch.cuda.synchronize()
        before = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        f_s, out = timed(forward)
        after = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        i_s, b_s = _backward_times(timed, out, [x] if x.requires_grad else [], params, stage.is_last)
        if i >= 2:  # the first two repeats warm up kernels and the allocator
            samples["F"].append(f_s)
            samples["I"].append(i_s)
            samples["B"].append(b_s)
            samples["act"].append(float(after - before))
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "F": med["F"],
        "I": med["I"],
        "W": max(med["B"] - med["I"], 0.0),
        "B": med["B"],
        "act_bytes": med["act"],
    }


def _backward_times(
    timed: Callable[[Callable[[], Any]], tuple[float, Any]],
    out: torch.Tensor,
    inputs: list[torch.Tensor],
    params: list[torch.nn.Parameter],
    is_last: bool,
) -> tuple[float, float]:
    """(I, B) seconds: backward to the stage input only, then the full backward."""
    grad = None if is_last else torch.ones_like(out)
    i_s = 0.0
    if inputs:
        i_s, _ = timed(lambda: torch.autograd.grad(out, inputs, grad_outputs=grad, retain_graph=True))
    b_s, _ = timed(lambda: torch.autograd.grad(out, [*inputs, *params], grad_outputs=grad))
    return i_s, b_s


def _merge_pairs(values: list[float]) -> tuple[float, ...]:
    return tuple(values[i] + values[i + 1] for i in range(0, len(values), 2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=16)
    parser.add_argument("--micro-batch-size", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--p2p-gbps", type=float, default=0.0, help="p2p bandwidth in GB/s (0: free)")
    parser.add_argument("--tiny", action="store_true", help="a small model for a CPU dry run")
    args = parser.parse_args()
    if args.tiny:
        args.d_model, args.heads, args.layers, args.seq_len, args.vocab = 64, 4, 8, 32, 256
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device visible; run on a GPU or pass --device cpu --tiny"}))
        return
    started = time.perf_counter()
    p, m = args.ranks, args.microbatches
    num_stages = 2 * p
    config = TrainConfig(
        vocab_size=args.vocab,
        seq_len=args.seq_len,
        d_model=args.d_model,
        n_heads=args.heads,
        n_layers=args.layers,
        pipeline=p,
        micro_batch_size=args.micro_batch_size,
    )
    tokens, targets = synthetic_batch(config, 0, 0, args.micro_batch_size)
    tokens, targets = tokens.to(device), targets.to(device)
    per_stage: list[dict[str, float]] = []
    x: torch.Tensor = tokens
    for s in range(num_stages):
        stage = GPTStage(config, s, num_stages).to(device)
        per_stage.append(_measure_stage(stage, x, targets, device, args.repeats))
        with (
            torch.no_grad(),
            torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"),
        ):
            x = stage(x).float().detach().requires_grad_(True)
        del stage
        if device.type == "cuda":
            torch.cuda.empty_cache()
    hidden_bytes = args.micro_batch_size * args.seq_len * args.d_model * 4
    p2p = hidden_bytes / (args.p2p_gbps * 1e9) if args.p2p_gbps > 0 else 0.0
    act = [max(st["act_bytes"], 1.0) / 2**20 for st in per_stage]  # MiB per in-flight micro-batch
    costs = CostModel(
        forward=tuple(st["F"] for st in per_stage),
        backward_input=tuple(st["I"] for st in per_stage),
        backward_weight=tuple(st["W"] for st in per_stage),
        activation=tuple(act) if device.type == "cuda" else (),
        p2p=p2p,
    )
    merged = CostModel(
        forward=_merge_pairs(list(costs.forward)),
        backward_input=_merge_pairs(list(costs.backward_input)),
        backward_weight=_merge_pairs(list(costs.backward_weight)),
        activation=_merge_pairs(act) if device.type == "cuda" else (),
        p2p=p2p,
    )
    rows: dict[str, dict[str, Any]] = {}

    def replay(name: str, orders: Any, placement: Placement, c: CostModel) -> None:
        sim = simulate(orders, placement, c, m)
        bound = lb_tight(costs, Placement.vshape(p), m)
        rows[name] = {
            "makespan_ms": round(1e3 * sim.makespan, 3),
            "vs_lb_tight": round(sim.makespan / bound, 4),
            "peak_activation": round(max(sim.peak_memory), 1),
        }

    hf = plan(costs, Placement.vshape(p), m)
    replay("HyperFrame", hf.orders, hf.placement, costs)
    for name in BASELINE_NAMES:
        try:
            b = baseline(name, p, m)
        except ScheduleError as exc:
            rows[name] = {"error": str(exc)}
            continue
        replay(name, b.orders, b.placement, merged if b.placement.num_stages == p else costs)
    best_torch = min(
        (r["makespan_ms"] for n, r in rows.items() if n != "HyperFrame" and "makespan_ms" in r), default=0.0
    )
    result = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "model": {
            "d_model": args.d_model,
            "layers": args.layers,
            "seq_len": args.seq_len,
            "vocab": args.vocab,
            "micro_batch_size": args.micro_batch_size,
            "precision": "bf16 autocast, fp32 LayerNorm/loss" if device.type == "cuda" else "fp32",
        },
        "ranks": p,
        "microbatches": m,
        "stages_ms": [{k: round(1e3 * v, 3) for k, v in st.items() if k != "act_bytes"} for st in per_stage],
        "activation_mib_per_microbatch": [round(a, 2) for a in act] if device.type == "cuda" else None,
        "peak_activation_unit": "MiB per rank"
        if device.type == "cuda"
        else "in-flight micro-batch-stages per rank",
        "p2p_ms": round(1e3 * p2p, 4),
        "lb_tight_ms": round(1e3 * lb_tight(costs, Placement.vshape(p), m), 3),
        "replay": rows,
        "hyperframe_vs_best_torch": round(best_torch / rows["HyperFrame"]["makespan_ms"], 4)
        if best_torch
        else None,
        "peak_memory_mib": round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
        if device.type == "cuda"
        else None,
        "wall_s": round(time.perf_counter() - started, 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
