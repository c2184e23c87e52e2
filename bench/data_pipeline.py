"""What DataLoader workers hide of a dataset's reading cost, and samples/s against wall-clock time.

    python -m bench data_pipeline

One CPU rank trains the built-in GPT on a map-style dataset (``data_factory``) whose every item
costs ``ITEM_S`` seconds to read (a sleep: the cost of a slow volume or a decoder, taking no CPU),
three ways in one run: no data cost, the cost read in the training process (``data_workers`` 0),
and the cost read by ``WORKERS`` prefetching workers, in ``ROUNDS`` rounds of the three (so that a
burst of load on a shared machine falls on every way alike). Printed per way: the median frame
time and data-wait share over the frames after the first ``WARMUP`` of each run (the first starts
the workers), then
the share of the data cost the workers hide, ``1 - (workers - free) / (inline - free)``, and the
reported samples/s (samples over the sum of frame times) over samples per wall-clock second of
the same frames (run_frame and after_frame, as ``FrameLoop.run`` calls them).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.pipeline.frame_loop import FrameLoop
from torch.utils.data import Dataset

ITEM_S = 0.006
WORKERS = 2
FRAMES = 10
WARMUP = 2
ROUNDS = 3
SIZE = 4096


class CostlyTokens(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Token sequences that are a pure function of their index, each costing ``item_s`` to read."""

    def __init__(self, config: TrainConfig, item_s: float) -> None:
        self.vocab, self.seq_len, self.item_s = config.vocab_size, config.seq_len, item_s

    def __len__(self) -> int:
        return SIZE

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.item_s:
            time.sleep(self.item_s)
        tokens = (torch.arange(self.seq_len + 1) * (index % 7 + 1) + index) % self.vocab
        return tokens[:-1], tokens[1:]


def costly(config: TrainConfig) -> CostlyTokens:
    return CostlyTokens(config, ITEM_S)


def free(config: TrainConfig) -> CostlyTokens:
    return CostlyTokens(config, 0.0)


@dataclass
class Way:
    name: str
    factory: str
    workers: int
    frame_s: list[float] = field(default_factory=list)
    data_wait: list[float] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def reported_over_wall(self) -> float:
        """Samples over the summed frame times, over samples per wall-clock second."""
        return self.wall_s / sum(self.frame_s)


def run(way: Way) -> None:
    """One run of ``way``; its measured frames are added to it."""
    config = TrainConfig(
        data_factory=f"bench.data_pipeline:{way.factory}",
        data_workers=way.workers,
        data_prefetch=4,
        policy="gpipe",
        n_layers=2,
        d_model=128,
        seq_len=64,
        microbatches_per_frame=8,
        micro_batch_size=2,
        frames=FRAMES,
    )
    loop = FrameLoop(config)
    try:
        for _ in range(WARMUP):
            loop.run_frame()
            loop.after_frame()
        began = time.perf_counter()
        while loop.frames_done < config.frames:
            metrics = loop.run_frame()
            loop.after_frame()
            way.frame_s.append(metrics.frame_s)
            way.data_wait.append(metrics.data_wait_share)
        way.wall_s += time.perf_counter() - began
    finally:
        loop.close()


def main() -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method=f"file://{Path(tmp) / 'store'}", rank=0, world_size=1)
        try:
            ways = [
                Way("no data cost", "free", 0),
                Way("cost, no workers", "costly", 0),
                Way(f"cost, {WORKERS} workers", "costly", WORKERS),
            ]
            for _ in range(ROUNDS):
                for way in ways:
                    run(way)
        finally:
            dist.destroy_process_group()
    print(
        f"one CPU rank, 16 samples per frame, {1e3 * ITEM_S:.1f} ms per sample read; medians of {ROUNDS} x {FRAMES - WARMUP} frames"
    )
    for way in ways:
        print(
            f"  {way.name:18s} frame {1e3 * statistics.median(way.frame_s):7.1f} ms, "
            f"data wait {100 * statistics.median(way.data_wait):5.1f} %, "
            f"reported samples/s / wall-clock {way.reported_over_wall:.3f}"
        )
    free_s, inline_s, workers_s = (statistics.median(w.frame_s) for w in ways)
    print(f"  data cost without workers: {1e3 * (inline_s - free_s):.1f} ms per frame")
    print(f"  hidden by {WORKERS} workers: {1 - (workers_s - free_s) / (inline_s - free_s):.1%}")


if __name__ == "__main__":
    main()
