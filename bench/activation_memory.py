"""Activation memory in real units: measured bytes per stage, and plan peaks against 1F1B's.

Run ``python -m bench.activation_memory`` (``--json FILE`` saves the numbers). CPU, fp32. The
model is the built-in GPT at d_model 512, 8 heads, 256 tokens per sample, vocabulary 4096, 8
blocks, one sample per micro-batch.

1. **A real run.** One gloo rank runs one frame of ZBV on both stages of a V (pipeline 1) and
   reports what its executor measured per stage (``PipelineExecutor.activation_bytes``), next to
   ``models.profiling.stage_activation_bytes`` for the same stages (the same counting; the test
   ``test_the_executor_measures_what_stage_activation_bytes_counts`` asserts equality).
2. **Plans on p = 4, m = 16.** The stages' bytes for one stage per rank (2 blocks each) and the
   V (1 block each), and a time model with F = I = W = 1 per block plus the output head's share
   of the FLOPs on the last stage (as ``bench.partitioner``). Per placement: 1F1B's peak (the
   default budget) in MiB; the planner's plan from the bytes; the plan it made from one unit
   per stage (the old budget) replayed on the bytes; torch's schedule on that placement.
   Peaks are the largest per-rank peak, makespans in units of one block's forward.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.gpt import gpt_model_spec
from hyperframe_runtime.models.profiling import stage_activation_bytes
from hyperframe_runtime.schedule.baselines import baseline
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Placement
from hyperframe_runtime.schedule.planner import default_memory_limit, plan
from hyperframe_runtime.schedule.simulate import simulate

from bench.partitioner import HEAD_COST

MODEL: dict[str, Any] = {"d_model": 512, "n_heads": 8, "seq_len": 256, "vocab_size": 4096, "n_layers": 8}
MIB = 2**20


def real_run() -> tuple[dict[int, int], list[int]]:
    """(the executor's measured bytes per stage, ``stage_activation_bytes``) on a V of 2 stages."""
    import torch.distributed as dist
    from hyperframe_runtime.pipeline.frame_loop import FrameLoop

    config = TrainConfig(**MODEL, policy="zbv", microbatches_per_frame=2, micro_batch_size=1, frames=1)
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=0, world_size=1)
        try:
            loop = FrameLoop(config)
            loop.run_frame()
            measured = loop.executor.activation_bytes
            loop.close()
        finally:
            dist.destroy_process_group()
    return measured, stage_activation_bytes(gpt_model_spec(config), 2, 1)


def placement_row(name: str, placement: Placement, torch_name: str, m: int) -> dict[str, Any]:
    n = placement.num_stages
    config = TrainConfig(**MODEL)
    sizes = [float(b) for b in stage_activation_bytes(gpt_model_spec(config), n, 1)]
    blocks = MODEL["n_layers"] // n
    times = [float(blocks)] * n
    times[-1] += HEAD_COST
    step = tuple(times)
    in_bytes = CostModel(forward=step, backward_input=step, backward_weight=step, activation=tuple(sizes))
    in_units = CostModel(forward=step, backward_input=step, backward_weight=step)
    budget = default_memory_limit(in_bytes, placement, m)
    from_bytes = plan(in_bytes, placement, m)
    from_units = plan(in_units, placement, m)
    chosen = baseline(torch_name, placement.num_ranks, m)

    def replay(orders: Any) -> tuple[float, float]:
        sim = simulate(orders, placement, in_bytes, m)
        return sim.makespan, max(sim.peak_memory)

    return {
        "placement": name,
        "stage_mib": [round(s / MIB, 2) for s in sizes],
        "one_f_one_b_peak_mib": budget / MIB,
        "planned_from_bytes": replay(from_bytes.orders),
        "planned_from_units": replay(from_units.orders),
        "torch": (torch_name, *replay(chosen.orders)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.activation_memory", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    measured, counted = real_run()
    print("Real run (1 gloo rank, V of 2 stages, CPU fp32), activation bytes per micro-batch:")
    for stage, size in sorted(measured.items()):
        print(
            f"  stage {stage}: executor {size} B ({size / MIB:.2f} MiB), stage_activation_bytes {counted[stage]} B"
        )
    p, m = 4, 16
    rows = [
        placement_row("one stage per rank", Placement.one_per_rank(p), "1F1B", m),
        placement_row("V", Placement.vshape(p), "ZBVZeroBubble", m),
    ]
    print(f"\np = {p}, m = {m}; peaks in MiB (largest rank), makespan in block forwards")
    print(
        "| placement | MiB per stage | 1F1B peak (budget) | HF from bytes: peak, makespan | HF from units: peak, makespan | torch: peak, makespan |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        fb, fu, (tname, tt, tp) = r["planned_from_bytes"], r["planned_from_units"], r["torch"]
        print(
            f"| {r['placement']} | {' '.join(f'{s:.2f}' for s in r['stage_mib'])} | {r['one_f_one_b_peak_mib']:.1f} "
            f"| {fb[1] / MIB:.1f}, {fb[0]:.2f} | {fu[1] / MIB:.1f}, {fu[0]:.2f} | {tname} {tp / MIB:.1f}, {tt:.2f} |"
        )
    if args.json:
        payload = {"measured": measured, "stage_activation_bytes": counted, "rows": rows}
        args.json.write_text(json.dumps(payload, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
