"""Real runs on CPU (gloo): HyperFrame planned from measured costs vs torch's ZBV and 1F1B.

    .venv/bin/python bench/real_cpu.py [--ranks 2] [--rounds 8] [--json]

NOISY CPU: the ranks share the host's cores with everything else running on it; read the ratios,
not the absolute times, and expect run-to-run spread of several percent.

What it does, on ``--ranks`` spawned gloo ranks and the built-in GPT:

1. Measure: run ``--warmup`` frames of HyperFrame (unit-cost plans, alternating split I/W and
   fused B backwards) and take the per-stage median F, I, W and B seconds of all ranks (the
   executor's own op timings). Done twice: on the V-shape
   split (``hyperframe``, as ZBV) and on one stage per rank (``hyperframe-1``, as 1F1B).
2. Plan: the HyperFrame planner orders the frame from those costs, split and fused, and keeps the
   shorter predicted frame (exactly what re-planning does in training).
3. Race: alternate one frame of each HyperFrame variant, torch ZBVZeroBubble (V-shape) and 1F1B
   (textbook order, one stage per rank) for ``--rounds`` rounds; report each policy's median
   frame (step) time, and the simulator's prediction for each order on the V-shape measured
   costs (pairs of V stages summed for the one-stage-per-rank orders).

All three run through the same executor; each has its own copy of the model and optimizer.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.pipeline.frame_loop import FrameLoop
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.simulate import lb_tight, simulate

POLICIES = ("hyperframe", "hyperframe-1", "zbv", "1f1b")
"""``hyperframe`` plans on the V-shape split (as ZBV); ``hyperframe-1`` on one stage per rank (as 1F1B)."""


def _config(args: argparse.Namespace, name: str) -> TrainConfig:
    policy, _, stages = name.partition("-")
    return TrainConfig(
        stages_per_rank=int(stages or 0),
        vocab_size=512,
        seq_len=args.seq_len,
        d_model=args.d_model,
        n_heads=4,
        n_layers=args.layers,
        pipeline=args.ranks,
        policy=policy,  # type: ignore[arg-type]
        microbatches_per_frame=args.microbatches,
        micro_batch_size=args.micro_batch_size,
        frames=10**6,
        replan_every=args.warmup,  # hyperframe explores split and fused backwards until then
        seed=1,
    )


def _worker(rank: int, args: argparse.Namespace, port: int, out: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks, timeout=timedelta(minutes=10))
    loops = {policy: FrameLoop(_config(args, policy)) for policy in POLICIES}
    for name in ("hyperframe", "hyperframe-1"):
        for _ in range(args.warmup):
            loops[name].run_frame()
        loops[name].replan()
    plan = loops["hyperframe"].plan
    for policy in ("zbv", "1f1b"):  # the first frame of a schedule includes torch's shape inference
        loops[policy].run_frame()
    times: dict[str, list[float]] = {policy: [] for policy in POLICIES}
    for _ in range(args.rounds):
        for policy in POLICIES:
            times[policy].append(loops[policy].run_frame().frame_s)
    if rank == 0:
        costs = plan.costs
        assert costs is not None
        predicted = {}
        for policy, loop in loops.items():
            # Replay each order on the measured costs (1F1B's stages are two V stages each).
            replay_costs = _merge_pairs(costs) if loop.plan.placement.num_stages == args.ranks else costs
            sim = simulate(loop.plan.orders, loop.plan.placement, replay_costs, args.microbatches)
            predicted[policy] = sim.makespan
        result: dict[str, Any] = {
            "label": "noisy CPU (shared cores); ratios matter, absolute times do not",
            "ranks": args.ranks,
            "microbatches": args.microbatches,
            "model": {
                "d_model": args.d_model,
                "layers": args.layers,
                "seq_len": args.seq_len,
                "micro_batch_size": args.micro_batch_size,
            },
            "measured_costs_ms": {
                "F": [round(1e3 * c, 3) for c in costs.forward],
                "I": [round(1e3 * c, 3) for c in costs.backward_input],
                "W": [round(1e3 * c, 3) for c in costs.backward_weight],
            },
            "hyperframe_split_backward": {
                n: loops[n].plan.split_backward for n in ("hyperframe", "hyperframe-1")
            },
            "measured_p2p_ms": round(1e3 * costs.p2p, 3),
            "lb_tight_ms": round(1e3 * lb_tight(costs, plan.placement, args.microbatches), 3),
            "predicted_ms": {p: round(1e3 * v, 3) for p, v in predicted.items()},
            "median_step_ms": {p: round(1e3 * statistics.median(v), 3) for p, v in times.items()},
            "step_ms_all": {p: [round(1e3 * x, 2) for x in v] for p, v in times.items()},
        }
        Path(out).write_text(json.dumps(result), encoding="utf-8")
    for loop in loops.values():
        loop.close()
    dist.destroy_process_group()


def _merge_pairs(costs: CostModel) -> CostModel:
    # A 1F1B stage holds the layers of two adjacent V-shape stages (2r and 2r + 1).
    def merged(values: tuple[float, ...]) -> tuple[float, ...]:
        return tuple(values[i] + values[i + 1] for i in range(0, len(values), 2))

    return CostModel(
        forward=merged(costs.forward),
        backward_input=merged(costs.backward_input),
        backward_weight=merged(costs.backward_weight),
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=4, help="frames measured before planning (>= 2)")
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--micro-batch-size", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--json", action="store_true", help="print the raw JSON result only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        mp.start_processes(  # type: ignore[attr-defined,no-untyped-call]
            _worker, args=(args, _free_port(), str(out)), nprocs=args.ranks, start_method="spawn"
        )
        result = json.loads(out.read_text(encoding="utf-8"))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"Real CPU run, {result['label']}")
    print(f"p={args.ranks} ranks, m={args.microbatches} micro-batches, GPT {result['model']}")
    print(f"measured per-stage costs (ms): {result['measured_costs_ms']}")
    print(f"measured p2p hand-off latency: {result['measured_p2p_ms']} ms")
    print(f"HyperFrame split backward chosen: {result['hyperframe_split_backward']}")
    print(f"LB_tight on measured costs: {result['lb_tight_ms']} ms")
    base = result["median_step_ms"]["hyperframe"]
    print(f"{'policy':<14}{'median step ms':>16}{'vs hyperframe':>15}{'predicted ms':>14}")
    for policy in POLICIES:
        median = result["median_step_ms"][policy]
        print(f"{policy:<14}{median:>16.1f}{median / base:>14.3f}x{result['predicted_ms'][policy]:>14.1f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
