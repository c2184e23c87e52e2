"""Partitioner benchmark: layer splits for mixed devices, planned by HyperFrame, against torch.

Run ``python -m bench.partitioner`` (``--json FILE`` saves the numbers). A cost replay, no GPUs:
the model is the built-in GPT at d_model 512, 8 heads, 256 tokens per sample, vocabulary 4096,
one sample per micro-batch, with 8 blocks per rank. A block costs F = I = W = 1; the output head
costs 2V / (24 d + 4 s) = 0.615 of a block (its share of the FLOPs) and rides on the last block.
Activation memory per layer is *measured* on that model (``models.profiling.activation_bytes``:
the bytes autograd keeps for the backward, plus the stage output), so peaks are in bytes.

Each row compares, at the same (p, m):

- the best torch schedule on an even layer split (each on its own placement), and 1F1B's peak;
- torch's ZBV on the V-aware split (``schedule.partition.vshape_partition``) against the
  planner on the same split (``HF / ZBV``: same costs, same placement, ZBV's peak memory as the
  planner's budget);
- HyperFrame: the planner's best over the V-aware split, the one-stage-per-rank split
  (``partition_layers``) and the two even splits, each planned within the memory torch's own
  schedule for that placement uses on that split (ZBV on a V, 1F1B on one stage per rank),
  against the best torch schedule. Moving blocks to the fast ranks moves their activations too,
  so the peak (last column, per rank, in MiB) can exceed 1F1B's on the even split.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hyperframe_runtime.schedule.baselines import BASELINE_NAMES, baseline
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Placement, ScheduleError
from hyperframe_runtime.schedule.partition import (
    Partition,
    partition_costs,
    partition_layers,
    vshape_partition,
)
from hyperframe_runtime.schedule.planner import plan
from hyperframe_runtime.schedule.simulate import simulate

LAYERS_PER_RANK = 8
HEAD_COST = 2 * 4096 / (24 * 512 + 4 * 256)

DEVICE_MIXES: tuple[tuple[str, Callable[[int, int], float]], ...] = (
    ("one device 1.5x slower", lambda r, p: 1.5 if r == p // 2 else 1.0),
    ("two classes, speed 1.0 and 0.6", lambda r, p: 1.0 if r < p // 2 else 1 / 0.6),
)

SHORT = {
    "GPipe": "GPipe",
    "1F1B": "1F1B",
    "Interleaved1F1B": "I1F1B",
    "LoopedBFS": "LoopBFS",
    "InterleavedZeroBubble": "IZB",
    "ZBVZeroBubble": "ZBV",
    "DualPipeV": "DualPV",
}


def measured_layer_bytes() -> tuple[int, int]:
    """(bytes of one block, bytes of the final LayerNorm + head) per micro-batch, measured."""
    import torch
    from hyperframe_runtime.config import TrainConfig
    from hyperframe_runtime.models.gpt import Block, GPTStage
    from hyperframe_runtime.models.profiling import activation_bytes

    config = TrainConfig(d_model=512, n_heads=8, seq_len=256, vocab_size=4096, n_layers=2)
    hidden = torch.randn(1, config.seq_len, config.d_model, requires_grad=True)
    block = activation_bytes(Block(config.d_model, config.n_heads, torch.Generator().manual_seed(0)), hidden)
    last_stage = activation_bytes(GPTStage(config, 1, 2), hidden)  # one block + the head
    return block, last_stage - block


def even_split(n_layers: int, n_stages: int) -> tuple[int, ...]:
    return tuple(round(i * n_layers / n_stages) for i in range(n_stages + 1))


def split_costs(
    bounds: Sequence[int], layer: list[float], layer_bytes: list[float], slow: list[float]
) -> CostModel:
    part = Partition(boundaries=tuple(bounds), stage_times=tuple(0.0 for _ in range(len(bounds) - 1)))
    return partition_costs(
        part,
        layer_forward=layer,
        layer_backward_input=layer,
        layer_backward_weight=layer,
        layer_activation=layer_bytes,
        rank_slowdown=slow,
    )


def row(label: str, slow: list[float], m: int, block_bytes: int, head_bytes: int) -> dict[str, Any]:
    p = len(slow)
    n_layers = LAYERS_PER_RANK * p
    layer = [1.0] * n_layers
    layer[-1] += HEAD_COST
    layer_bytes = [float(block_bytes)] * n_layers
    layer_bytes[-1] += head_bytes
    torch_runs: dict[str, dict[str, float]] = {}
    for name in BASELINE_NAMES:
        try:
            b = baseline(name, p, m)
        except ScheduleError:
            continue
        costs = split_costs(even_split(n_layers, b.placement.num_stages), layer, layer_bytes, slow)
        result = simulate(b.orders, b.placement, costs, m)
        torch_runs[name] = {"makespan": result.makespan, "peak_bytes": max(result.peak_memory)}
    best_name = min(torch_runs, key=lambda n: torch_runs[n]["makespan"])
    v_split = vshape_partition(layer, slow).boundaries
    v_costs = split_costs(v_split, layer, layer_bytes, slow)
    zbv = baseline("ZBVZeroBubble", p, m)
    zbv_run = simulate(zbv.orders, zbv.placement, v_costs, m)
    # Same split, same placement, same memory as ZBV: the planner must be at least as good.
    hf_v = plan(v_costs, Placement.vshape(p), m, memory_limit=max(zbv_run.peak_memory))
    candidates: dict[str, tuple[Any, Placement, CostModel]] = {
        "V-aware split, V": (hf_v, Placement.vshape(p), v_costs)
    }
    splits = (
        ("1/rank split", Placement.one_per_rank(p), partition_layers(layer, slow).boundaries),
        ("even split, V", Placement.vshape(p), even_split(n_layers, 2 * p)),
        ("even split, 1/rank", Placement.one_per_rank(p), even_split(n_layers, p)),
    )
    for tag, placement, bounds in splits:
        costs = split_costs(bounds, layer, layer_bytes, slow)
        # Each split gets the memory torch's own schedule for its placement uses on it (ZBV on a
        # V, 1F1B on one stage per rank, which is the planner's default budget).
        limit = max(simulate(zbv.orders, placement, costs, m).peak_memory) if placement.is_vshape else None
        candidates[tag] = (plan(costs, placement, m, memory_limit=limit), placement, costs)
    hf_tag = min(candidates, key=lambda t: candidates[t][0].predicted_makespan)
    hf_plan, hf_placement, hf_costs = candidates[hf_tag]
    hf_peak = max(simulate(hf_plan.orders, hf_placement, hf_costs, m).peak_memory)
    return {
        "devices": label,
        "p": p,
        "m": m,
        "torch_best": torch_runs[best_name]["makespan"],
        "torch_name": best_name,
        "torch_1f1b_peak_bytes": torch_runs["1F1B"]["peak_bytes"],
        "zbv_v_split": zbv_run.makespan,
        "zbv_v_split_peak_bytes": max(zbv_run.peak_memory),
        "hf_v_split": hf_v.predicted_makespan,
        "hf_v_split_limit_bytes": hf_v.memory_limit,
        "hyperframe": hf_plan.predicted_makespan,
        "hf_choice": hf_tag,
        "hf_peak_bytes": hf_peak,
        "speedup": torch_runs[best_name]["makespan"] / hf_plan.predicted_makespan,
        "v_split": list(v_split),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.partitioner", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--quick", action="store_true", help="p = 4 only")
    args = parser.parse_args(argv)
    block_bytes, head_bytes = measured_layer_bytes()
    mib = 2**20
    print(
        f"Measured activation per micro-batch: block {block_bytes / mib:.2f} MiB, head {head_bytes / mib:.2f} MiB; "
        f"head cost {HEAD_COST:.3f} block\n"
    )
    print(
        "| devices | p | m | best torch, even split | ZBV, V-aware split | HF, same split | HF / ZBV "
        "| HyperFrame (best split) | speedup | peak MiB 1F1B even / HF |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for label, slow_of in DEVICE_MIXES:
        for p in (4,) if args.quick else (4, 8, 16):
            for m in (2 * p, 4 * p):
                r = row(label, [slow_of(k, p) for k in range(p)], m, block_bytes, head_bytes)
                rows.append(r)
                print(
                    f"| {label} | {p} | {m} | {r['torch_best']:.2f} ({SHORT[r['torch_name']]}) "
                    f"| {r['zbv_v_split']:.2f} | {r['hf_v_split']:.2f} | {r['hf_v_split'] / r['zbv_v_split']:.3f} "
                    f"| {r['hyperframe']:.2f} ({r['hf_choice']}) | **{r['speedup']:.2f}x** "
                    f"| {r['torch_1f1b_peak_bytes'] / mib:.0f} / {r['hf_peak_bytes'] / mib:.0f} |"
                )
    for label, _ in DEVICE_MIXES:
        mine = [r for r in rows if r["devices"] == label]
        worst = min(mine, key=lambda r: r["speedup"])
        print(
            f"\n{label}: smallest speedup {worst['speedup']:.3f}x (p = {worst['p']}, m = {worst['m']})",
            end="",
        )
    worst_zbv = max(rows, key=lambda r: r["hf_v_split"] / r["zbv_v_split"])
    print(
        f"\nWorst HF / ZBV on the same split: {worst_zbv['hf_v_split'] / worst_zbv['zbv_v_split']:.4f} "
        f"({worst_zbv['devices']}, p = {worst_zbv['p']}, m = {worst_zbv['m']})"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"block_bytes": block_bytes, "head_bytes": head_bytes, "rows": rows}, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
