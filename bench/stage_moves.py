"""What a stage move costs between frames: a re-split, and a placement change, on 2 gloo ranks.

    python -m bench stage_moves

The built-in GPT of ``bench real_cpu``'s big-vocab row (8 blocks, a 16384-token embedding and
head: 2.1 M of its parameters) on one stage per rank. Timed, each 6 times, alternating: a re-split
of the layers ``[0, 4, 8] <-> [0, 6, 8]`` (two blocks change rank, the embedding and head stay),
and a placement change between one stage per rank and the V (most parameters change rank).
``StageSet.moved_to`` sends only what changes rank; its seconds are what the hyperframe policy's
``replan_s`` carries for a move.
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from dataclasses import replace
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.pipeline.frame_loop import FrameLoop
from hyperframe_runtime.pipeline.partitioning import LayerProfile
from hyperframe_runtime.pipeline.planning import initial_plan

from bench.real_cpu import ROWS

MOVES = 6


def _worker(rank: int, port: int) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=timedelta(minutes=5))
    row = ROWS["big-vocab"]
    config = TrainConfig(
        pipeline=2, policy="1f1b", microbatches_per_frame=row.microbatches,
        micro_batch_size=row.micro_batch_size, frames=100, seed=1, layer_split="even", **row.model,  # type: ignore[arg-type]
    )  # fmt: skip
    loop = FrameLoop(config)
    loop.run_frame()
    one, context = loop.plan, loop.stage_context
    uneven = replace(context, profile=LayerProfile(layer_costs=(1.0,) * 8, rank_slowdown=(1.0, 3.0)))
    v = initial_plan(replace(config, policy="zbv"))
    timings: dict[str, list[float]] = {"re-split": [], "placement": []}
    for i in range(MOVES):
        began = time.perf_counter()
        loop.stages = loop.stages.moved_to(uneven if i % 2 == 0 else context, one.placement, one.orders)
        timings["re-split"].append(time.perf_counter() - began)
    for i in range(MOVES):
        plan = v if i % 2 == 0 else one
        began = time.perf_counter()
        loop.stages = loop.stages.moved_to(context, plan.placement, plan.orders)
        timings["placement"].append(time.perf_counter() - began)
    if rank == 0:
        print("big-vocab GPT, 2 gloo ranks; median of", MOVES, "moves each")
        for name, values in timings.items():
            print(
                f"  {name}: {1e3 * statistics.median(values):.1f} ms (min {1e3 * min(values):.1f}, max {1e3 * max(values):.1f})"
            )
    dist.destroy_process_group()


def main() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    mp.start_processes(_worker, args=(port,), nprocs=2, start_method="spawn")  # type: ignore[attr-defined,no-untyped-call]


if __name__ == "__main__":
    main()
