"""What a stage move costs between frames: a re-split, and a placement change, on 2 gloo ranks.

    python -m bench stage_moves

The built-in GPT of ``bench real_cpu``'s big-vocab row (8 blocks, a 16384-token embedding and
head: 2.1 M of its parameters) on one stage per rank. Timed, each 6 times, alternating: a re-split
of the layers ``[0, 4, 8] <-> [0, 6, 8]`` (two blocks change rank, the embedding and head stay),
and a placement change between one stage per rank and the V (most parameters change rank).
``StageSet.moved_to`` sends only what changes rank; its seconds are what the hyperframe policy's
``replan_s`` carries for a move.

A second row is at a size that matters on this machine: a stack of 8 linear layers of
5120 x 5120 (210 M parameters, 840 MB, plus AdamW's two moments after one step) split 6 / 2
over the two ranks, moved to 4 / 4: two layers (52 M parameters and their moments, 630 MB)
go from rank 0 to rank 1 (``pipeline.stage_move.move_state``, point to point in 32 MiB buckets).
It prints the move's seconds and each rank's peak resident memory above its steady state during
the move (sampled every millisecond from ``/proc/self/statm``), against the bytes it received
or sent. The new stages are built before the move (not counted: that is the build's memory).
"""

from __future__ import annotations

import gc
import os
import socket
import statistics
import threading
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
from hyperframe_runtime.pipeline.stage_move import BUCKET_BYTES, move_state
from torch import nn

from bench.real_cpu import ROWS

MOVES = 6
BIG_WIDTH = 5120
BIG_LAYERS = 8


def _rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _PeakRss:
    """The largest resident set seen while the block runs, sampled every millisecond."""

    def __enter__(self) -> _PeakRss:
        self.before = self.peak = _rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.001):
            self.peak = max(self.peak, _rss_bytes())

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_bytes())


def _stack(layers: range) -> nn.Module:
    module = nn.Module()
    for i in layers:
        module.add_module(f"layer{i}", nn.Linear(BIG_WIDTH, BIG_WIDTH, bias=False))
    return module


def _big_row(rank: int) -> None:
    torch.manual_seed(rank)
    old = _stack(range(0, 6) if rank == 0 else range(6, BIG_LAYERS))
    old_opt = torch.optim.AdamW(old.parameters(), lr=1e-4)
    for p in old.parameters():
        p.grad = torch.ones_like(p)
    old_opt.step()
    for p in old.parameters():
        p.grad = None
    new = _stack(range(0, 4) if rank == 0 else range(4, BIG_LAYERS))
    new_opt = torch.optim.AdamW(new.parameters(), lr=1e-4)
    gc.collect()
    world = dist.group.WORLD
    assert world is not None
    dist.barrier()
    began = time.perf_counter()
    with _PeakRss() as rss:
        stats = move_state({0: old}, old_opt, {0: new}, new_opt, pp_group=world)
    seconds = time.perf_counter() - began
    rows: list[tuple[float, int, int, int]] = [(0.0, 0, 0, 0), (0.0, 0, 0, 0)]
    dist.all_gather_object(rows, (seconds, rss.peak - rss.before, stats.sent_bytes, stats.received_bytes))
    if rank == 0:
        params = BIG_LAYERS * BIG_WIDTH * BIG_WIDTH
        print(
            f"{BIG_LAYERS} x Linear({BIG_WIDTH}, {BIG_WIDTH}) ({params / 1e6:.0f} M parameters), AdamW, 6/2 -> 4/4:"
        )
        for r, row in enumerate(rows):
            secs, peak, sent, received = row
            moved = max(sent, received)
            print(
                f"  rank {r}: move {secs:.2f} s, sent {sent / 2**20:.0f} MiB, received {received / 2**20:.0f} MiB, "
                f"peak RSS above steady {peak / 2**20:.0f} MiB = {peak / moved:.3f}x the bytes moved "
                f"(goal <= 1.1x + one {BUCKET_BYTES // 2**20} MiB bucket = {(1.1 * moved + BUCKET_BYTES) / moved:.3f}x)"
            )


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
    del loop
    gc.collect()
    _big_row(rank)
    dist.destroy_process_group()


def main() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    mp.start_processes(_worker, args=(port,), nprocs=2, start_method="spawn")  # type: ignore[attr-defined,no-untyped-call]


if __name__ == "__main__":
    main()
