"""Per-rank frame measurements and the per-frame metrics computed from all ranks.

Definitions (per frame; shares are averaged over ranks and relative to the frame time, the
slowest rank's wall time for the frame including the optimizer step):

- ``bubble_share``: time inside the pipeline program not spent computing: waiting for a
  neighbour's activation or gradient (pipeline bubbles and p2p transfer time together: on one
  host they cannot be told apart), plus the time to issue sends and receives.
- ``comm_wait_share``: time blocked on the data-parallel gradient all-reduce after the pipeline
  program, i.e. the part of DP communication that did not overlap with compute.
- ``peak_memory_bytes``: the largest per-rank peak: ``torch.cuda.max_memory_allocated`` on GPU
  (reset every frame), the process's peak RSS on CPU.
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from hyperframe_runtime.pipeline.executor import FrameRun

__all__ = ["FrameMetrics", "RankFrame", "frame_metrics", "peak_memory_bytes", "reset_peak_memory"]


@dataclass(frozen=True, slots=True)
class RankFrame:
    """One rank's measurements of one frame, in plain data (it is all-gathered)."""

    rank: int
    pp_rank: int
    dp_rank: int
    records: list[tuple[int, str, int, float, float, float]]
    """``(stage, kind, microbatch, start, end, wait)`` of every op, seconds from the frame start."""
    losses: list[float]
    wall_start: float
    pipeline_s: float
    dp_wait_s: float
    frame_s: float
    peak_memory_bytes: int
    frame: int = 0
    """Frames completed, counting this one."""

    @classmethod
    def from_run(
        cls, run: FrameRun, *, frame: int, rank: int, pp_rank: int, dp_rank: int, peak_memory: int
    ) -> RankFrame:
        return cls(
            frame=frame,
            rank=rank,
            pp_rank=pp_rank,
            dp_rank=dp_rank,
            records=[(r.stage, r.kind.value, r.microbatch, r.start, r.end, r.wait) for r in run.records],
            losses=list(run.losses),
            wall_start=run.wall_start,
            pipeline_s=run.pipeline_s,
            dp_wait_s=run.dp_wait_s,
            frame_s=run.frame_s,
            peak_memory_bytes=peak_memory,
        )

    @property
    def compute_s(self) -> float:
        return sum(end - start for _, _, _, start, end, _ in self.records)


@dataclass(frozen=True, slots=True)
class FrameMetrics:
    """The benchmark baseline of one frame (one optimizer step)."""

    frame: int
    """Frames completed, counting this one."""
    loss: float
    """Mean loss over the frame's micro-batches and data-parallel replicas."""
    frame_s: float
    samples_per_s: float
    tokens_per_s: float
    peak_memory_bytes: int
    comm_wait_share: float
    bubble_share: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def frame_metrics(
    frame: int,
    ranks: Sequence[RankFrame],
    *,
    samples_per_frame: int,
    tokens_per_sample: int,
    loss_terms: int,
) -> FrameMetrics:
    """Combine every rank's :class:`RankFrame` of one frame. ``loss_terms`` = micro-batches x replicas."""
    frame_s = max(r.frame_s for r in ranks)
    loss = sum(sum(r.losses) for r in ranks) / loss_terms
    bubble = sum(max(0.0, r.pipeline_s - r.compute_s) for r in ranks) / len(ranks)
    comm = sum(r.dp_wait_s for r in ranks) / len(ranks)
    return FrameMetrics(
        frame=frame,
        loss=loss,
        frame_s=frame_s,
        samples_per_s=samples_per_frame / frame_s if frame_s > 0 else 0.0,
        tokens_per_s=samples_per_frame * tokens_per_sample / frame_s if frame_s > 0 else 0.0,
        peak_memory_bytes=max(r.peak_memory_bytes for r in ranks),
        comm_wait_share=comm / frame_s if frame_s > 0 else 0.0,
        bubble_share=bubble / frame_s if frame_s > 0 else 0.0,
    )


def peak_memory_bytes(device: torch.device) -> int:
    """Peak memory of this rank since the last reset (GPU) or since the process started (CPU)."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # Linux reports KiB


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
