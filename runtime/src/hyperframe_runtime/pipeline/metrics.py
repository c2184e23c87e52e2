"""Per-rank frame measurements and the per-frame metrics computed from all ranks.

Definitions (per frame; shares are averaged over ranks and relative to the frame time, the
slowest rank's wall time for the frame including the optimizer step):

- ``bubble_share``: time inside the pipeline program not spent computing: waiting for a
  neighbour's activation or gradient (pipeline bubbles and p2p transfer time together: on one
  host they cannot be told apart), plus the time to issue sends and receives.
- ``comm_wait_share``: time blocked on the data-parallel gradient all-reduce after the pipeline
  program, i.e. the part of DP communication that did not overlap with compute.
- ``dp_overlap_share``: the share of the DP all-reduces' time in flight that was hidden behind
  the rank's remaining work: ``1 - exposed wait / in flight``, summed over ranks, where a rank's
  in-flight time is the union of its stages' all-reduce spans (from the REDUCE_GRAD point until
  seen complete, which is after the op it completed during: an upper bound); 0 without DP.
- ``data_wait_share``: time waiting for the frame's batch (``hyperframe_runtime.data``): reading
  it in the training process, or the part of the DataLoader workers' reading that prefetch did not
  hide. It is inside the frame time, so ``samples_per_s`` is samples over wall-clock time.
- ``peak_memory_bytes``: the largest per-rank peak: ``torch.cuda.max_memory_allocated`` on GPU
  (reset every frame), the process's peak RSS on CPU; ``rank_peak_memory_bytes`` each global
  rank's, in rank order.
- ``activation_peak_bytes`` and ``activation_peak_1f1b_bytes``: the running plan's predicted
  activation peak (largest over ranks) and 1F1B's on the same calibrated costs, from each stage's
  measured bytes per micro-batch (``pipeline.memory``); 0 until those are measured.
- ``predicted_frame_s``: the calibrated cost model's prediction for the frame's plan
  (``pipeline.calibration``); 0 until the first calibration.
- ``schedule``: which candidate schedule ran (``pipeline.selection``); ``exploring`` is true while
  the hyperframe policy is still measuring candidates.
- ``replan_s``: seconds this frame's critical path spent on re-planning (receiving and switching
  to a new plan, moving stages when the placement changed); the planning itself runs in the
  background and its seconds are ``planner_s``, on the frame that swapped the plan in.
- ``exchange_s``: seconds this rank spent after the frame's clock stopped in the collectives
  the runtime adds per frame (the summaries' all-gather, and the op records' when gathered).

Every frame the ranks exchange only a fixed handful of numbers each (:class:`RankSummary`); the
per-op records (:class:`RankFrame`) are gathered only in frames that need them.
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from hyperframe_runtime.pipeline.executor import FrameRun

__all__ = [
    "FrameMetrics",
    "RankFrame",
    "RankSummary",
    "exchange_summaries",
    "frame_metrics",
    "in_flight_s",
    "metrics_from_summaries",
    "peak_memory_bytes",
    "reset_peak_memory",
]


@dataclass(frozen=True, slots=True)
class RankSummary:
    """The few numbers of one rank's frame that every frame's metrics need (exchanged as floats)."""

    frame_s: float
    pipeline_s: float
    compute_s: float
    dp_wait_s: float
    loss_sum: float
    peak_memory_bytes: float
    drift: float = 0.0
    """Largest relative drift of this rank's measured op costs from those its plan was made from."""
    data_wait_s: float = 0.0
    """Seconds this rank waited for the frame's batch (inside ``frame_s``)."""
    dp_in_flight_s: float = 0.0
    """Seconds this rank had a DP all-reduce in flight (the union of its stages' spans)."""

    def to_list(self) -> list[float]:
        return [getattr(self, name) for name in self.__slots__]

    @classmethod
    def from_list(cls, values: Sequence[float]) -> RankSummary:
        return cls(*(float(v) for v in values))

    @classmethod
    def size(cls) -> int:
        return len(cls.__slots__)


@dataclass(frozen=True, slots=True)
class RankFrame:
    """One rank's measurements of one frame, in plain data (it is all-gathered)."""

    rank: int
    pp_rank: int
    dp_rank: int
    records: list[tuple[int, str, int, float, float, float]]
    """``(stage, kind, microbatch, start, end, wait)`` of every op, seconds from the frame start."""
    reduces: list[tuple[int, float, float]]
    """``(stage, start, end)`` of every DP all-reduce, seconds from the frame start."""
    losses: list[float]
    wall_start: float
    pipeline_s: float
    dp_wait_s: float
    frame_s: float
    peak_memory_bytes: int
    frame: int = 0
    """Frames completed, counting this one."""
    activation_bytes: list[tuple[int, int]] = field(default_factory=list)
    """``(stage, bytes)``: activation memory one micro-batch of each of this rank's stages holds
    until its backward (measured once per stage build; the calibration's ``costs.activation``)."""
    data_wait_s: float = 0.0
    """Seconds spent waiting for the frame's batch, inside ``frame_s``."""

    @classmethod
    def from_run(
        cls,
        run: FrameRun,
        *,
        frame: int,
        rank: int,
        pp_rank: int,
        dp_rank: int,
        peak_memory: int,
        data_wait_s: float = 0.0,
    ) -> RankFrame:
        return cls(
            frame=frame,
            rank=rank,
            pp_rank=pp_rank,
            dp_rank=dp_rank,
            records=[(r.stage, r.kind.value, r.microbatch, r.start, r.end, r.wait) for r in run.records],
            reduces=list(run.reduces),
            losses=list(run.losses),
            wall_start=run.wall_start,
            pipeline_s=run.pipeline_s,
            dp_wait_s=run.dp_wait_s,
            frame_s=run.frame_s,
            peak_memory_bytes=peak_memory,
            activation_bytes=sorted(run.activation_bytes.items()),
            data_wait_s=data_wait_s,
        )

    @property
    def compute_s(self) -> float:
        return sum(end - start for _, _, _, start, end, _ in self.records)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RankFrame:
        """The inverse of :meth:`to_json` (tuples come back from JSON lists)."""
        return cls(
            **{
                **data,
                "records": [tuple(r) for r in data["records"]],
                "reduces": [tuple(r) for r in data["reduces"]],
                "activation_bytes": [tuple(a) for a in data.get("activation_bytes", [])],
            }
        )

    def summary(self) -> RankSummary:
        return RankSummary(
            frame_s=self.frame_s,
            pipeline_s=self.pipeline_s,
            compute_s=self.compute_s,
            dp_wait_s=self.dp_wait_s,
            loss_sum=sum(self.losses),
            peak_memory_bytes=float(self.peak_memory_bytes),
            data_wait_s=self.data_wait_s,
            dp_in_flight_s=in_flight_s(self.reduces),
        )


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
    predicted_frame_s: float = 0.0
    schedule: str = ""
    exploring: bool = False
    replan_s: float = 0.0
    planner_s: float = 0.0
    exchange_s: float = 0.0
    activation_peak_bytes: float = 0.0
    activation_peak_1f1b_bytes: float = 0.0
    data_wait_share: float = 0.0
    rank_peak_memory_bytes: tuple[int, ...] = ()
    dp_overlap_share: float = 0.0

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
    return metrics_from_summaries(
        frame,
        [r.summary() for r in ranks],
        samples_per_frame=samples_per_frame,
        tokens_per_sample=tokens_per_sample,
        loss_terms=loss_terms,
    )


def metrics_from_summaries(
    frame: int,
    ranks: Sequence[RankSummary],
    *,
    samples_per_frame: int,
    tokens_per_sample: int,
    loss_terms: int,
) -> FrameMetrics:
    """Combine every rank's :class:`RankSummary` of one frame (see :func:`frame_metrics`)."""
    frame_s = max(r.frame_s for r in ranks)
    loss = sum(r.loss_sum for r in ranks) / loss_terms
    bubble = sum(max(0.0, r.pipeline_s - r.compute_s) for r in ranks) / len(ranks)
    comm = sum(r.dp_wait_s for r in ranks) / len(ranks)
    data = sum(r.data_wait_s for r in ranks) / len(ranks)
    in_flight = sum(r.dp_in_flight_s for r in ranks)
    exposed = sum(min(r.dp_wait_s, r.dp_in_flight_s) for r in ranks)
    return FrameMetrics(
        frame=frame,
        loss=loss,
        frame_s=frame_s,
        samples_per_s=samples_per_frame / frame_s if frame_s > 0 else 0.0,
        tokens_per_s=samples_per_frame * tokens_per_sample / frame_s if frame_s > 0 else 0.0,
        peak_memory_bytes=int(max(r.peak_memory_bytes for r in ranks)),
        comm_wait_share=comm / frame_s if frame_s > 0 else 0.0,
        bubble_share=bubble / frame_s if frame_s > 0 else 0.0,
        data_wait_share=data / frame_s if frame_s > 0 else 0.0,
        rank_peak_memory_bytes=tuple(int(r.peak_memory_bytes) for r in ranks),
        dp_overlap_share=1.0 - exposed / in_flight if in_flight > 0 else 0.0,
    )


def in_flight_s(spans: Sequence[tuple[int, float, float]]) -> float:
    """Seconds covered by the union of ``(stage, start, end)`` spans."""
    total, reach = 0.0, float("-inf")
    for _, start, end in sorted(spans, key=lambda s: s[1]):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def peak_memory_bytes(device: torch.device) -> int:
    """Peak memory of this rank since the last reset (GPU) or since the process started (CPU)."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # Linux reports KiB


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def exchange_summaries(summary: RankSummary) -> list[RankSummary]:
    """All-gather every rank's summary (a few floats each; the only per-frame collective)."""
    mine = torch.tensor(summary.to_list(), dtype=torch.float64)
    if dist.get_backend() == "nccl":
        mine = mine.cuda()
    out = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(out, mine)
    return [RankSummary.from_list(t.cpu().tolist()) for t in out]
