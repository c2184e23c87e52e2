"""What one rank of the gate found, in a form that travels through the rendezvous store.

Every rank publishes a :class:`RankRecord` (its device figures and its first failure) under
``dev/<rank>``; the node agents read all of them to build a job-wide report, so every node's
report names every node whose device or host failed, or whose ranks are missing.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from hyperframe.smoke_report import DeviceFigures

__all__ = ["AllReduceFigure", "Failure", "RankRecord", "rank_ranges"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """The first failed check of a rank or node."""

    reason_id: str
    """A key of :data:`hyperframe.smoke_remedies.FAILURES`."""
    message: str
    """What failed, with figures and the device, rank or node named."""
    missing_ranks: tuple[int, ...] = ()
    suspect_node_ranks: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AllReduceFigure:
    """One all-reduce size's timing (slowest rank), nccl-tests style."""

    size_bytes: int
    seconds: float
    algbw_gbps: float
    busbw_gbps: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RankRecord:
    """One rank's result."""

    rank: int
    node_rank: int
    node: str
    device: DeviceFigures
    failure: Failure | None = None
    notes: tuple[str, ...] = ()
    """Informational lines (driver/torch CUDA versions, skipped checks)."""
    allreduce: tuple[AllReduceFigure, ...] = field(default=())
    group_init_s: float | None = None
    """Seconds to create the process group and its first communicator (NCCL init time)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> RankRecord:
        raw: dict[str, Any] = json.loads(text)
        failure = raw.get("failure")
        return cls(
            rank=int(raw["rank"]),
            node_rank=int(raw["node_rank"]),
            node=str(raw["node"]),
            device=DeviceFigures(**raw["device"]),
            failure=None
            if failure is None
            else Failure(
                reason_id=failure["reason_id"],
                message=failure["message"],
                missing_ranks=tuple(failure["missing_ranks"]),
                suspect_node_ranks=tuple(failure["suspect_node_ranks"]),
            ),
            notes=tuple(raw.get("notes", ())),
            allreduce=tuple(AllReduceFigure(**f) for f in raw.get("allreduce", ())),
            group_init_s=raw.get("group_init_s"),
        )


def rank_ranges(values: list[int] | tuple[int, ...]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``: short names for many ranks or nodes."""
    ordered = sorted(set(values))
    if not ordered:
        return "none"
    parts: list[str] = []
    start = prev = ordered[0]
    for value in [*ordered[1:], None]:
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    return ", ".join(parts)
