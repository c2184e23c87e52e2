"""Schedule IR: actions, per-rank orders and stage placements.

A schedule is data. An :class:`Action` names one unit of work, ``(stage, kind, microbatch)``,
and prints in torch's compute-only CSV form (``"2F0"``, ``"1I3"``, ``"0W1"``, ``"3B2"``).
:data:`Orders` maps each rank to the actions it runs, in order. A :class:`Placement` says which
rank owns which pipeline stage. Everything here is pure: no torch, no process groups.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "COMPUTE_KINDS",
    "Action",
    "OpKind",
    "Orders",
    "Placement",
    "ScheduleError",
]


class ScheduleError(ValueError):
    """A schedule, placement or cost description is malformed, invalid or deadlocks."""


class OpKind(StrEnum):
    """The kind of an action. Compute kinds come first; comm kinds are optional in orders."""

    F = "F"
    """Forward of one micro-batch through one stage."""
    I = "I"  # noqa: E741 - the established name (torch: BACKWARD_INPUT, printed "I")
    """Backward-input: gradient w.r.t. the stage input (what the previous stage waits for)."""
    W = "W"
    """Backward-weight: gradient w.r.t. the stage parameters (nobody waits for it)."""
    B = "B"
    """Full backward: I and W fused in one op."""
    SEND_F = "SEND_F"
    RECV_F = "RECV_F"
    SEND_B = "SEND_B"
    RECV_B = "RECV_B"

    @property
    def is_compute(self) -> bool:
        return self in COMPUTE_KINDS

    @property
    def is_backward(self) -> bool:
        """True for the ops that send a gradient to the previous stage (I and B)."""
        return self in (OpKind.I, OpKind.B)


COMPUTE_KINDS: frozenset[OpKind] = frozenset({OpKind.F, OpKind.I, OpKind.W, OpKind.B})

# Longest kinds first so "SEND_F" is not read as "S" + garbage.
_ACTION_RE = re.compile(r"^\s*(\d+)(SEND_F|RECV_F|SEND_B|RECV_B|F|I|W|B)(\d+)\s*$")


@dataclass(frozen=True, slots=True, order=True)
class Action:
    """One unit of pipeline work: ``kind`` of micro-batch ``microbatch`` on stage ``stage``."""

    stage: int
    kind: OpKind
    microbatch: int

    def __post_init__(self) -> None:
        if self.stage < 0 or self.microbatch < 0:
            raise ScheduleError(
                f"action {self.stage}{self.kind}{self.microbatch}: stage and microbatch must be >= 0"
            )

    def __str__(self) -> str:
        return f"{self.stage}{self.kind.value}{self.microbatch}"

    def __repr__(self) -> str:
        return f"Action({self})"

    @classmethod
    def parse(cls, text: str) -> Action:
        """Parse ``"2F0"``-style text (torch's ``_Action`` string form) into an Action."""
        match = _ACTION_RE.match(text)
        if match is None:
            raise ScheduleError(
                f"cannot parse action {text!r}: expected STAGE KIND MICROBATCH such as '2F0', "
                f"'1I3', '0W1' or '3B2' (kinds: {', '.join(k.value for k in OpKind)})"
            )
        return cls(int(match.group(1)), OpKind(match.group(2)), int(match.group(3)))


Orders = dict[int, list[Action]]
"""Rank -> the ordered actions that rank runs."""


@dataclass(frozen=True)
class Placement:
    """Which rank owns each pipeline stage: ``stage_to_rank[s]`` is the rank of stage ``s``."""

    stage_to_rank: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.stage_to_rank:
            raise ScheduleError("placement: stage_to_rank is empty; need at least one stage")
        ranks = set(self.stage_to_rank)
        expected = set(range(len(ranks)))
        if ranks != expected:
            raise ScheduleError(
                f"placement: stage_to_rank {list(self.stage_to_rank)} must use every rank "
                f"0..{len(ranks) - 1} at least once (found ranks {sorted(ranks)})"
            )

    @classmethod
    def one_per_rank(cls, p: int) -> Placement:
        """Stage s on rank s (GPipe, 1F1B, ZB-H1/H2)."""
        _check_positive("p", p)
        return cls(tuple(range(p)))

    @classmethod
    def looped(cls, p: int, v: int) -> Placement:
        """``v`` stages per rank, stage s on rank ``s % p`` (Interleaved1F1B, LoopedBFS)."""
        _check_positive("p", p)
        _check_positive("v", v)
        return cls(tuple(s % p for s in range(p * v)))

    @classmethod
    def vshape(cls, p: int) -> Placement:
        """Two stages per rank in a V: stage s on rank s for s < p, else on rank 2p-1-s (ZBV, DualPipeV)."""
        _check_positive("p", p)
        return cls(tuple(s if s < p else 2 * p - 1 - s for s in range(2 * p)))

    @property
    def num_stages(self) -> int:
        return len(self.stage_to_rank)

    @property
    def num_ranks(self) -> int:
        return max(self.stage_to_rank) + 1

    def rank_of(self, stage: int) -> int:
        if not 0 <= stage < self.num_stages:
            raise ScheduleError(f"stage {stage} is out of range: placement has {self.num_stages} stages")
        return self.stage_to_rank[stage]

    def stages_of(self, rank: int) -> tuple[int, ...]:
        """The stages rank ``rank`` owns, in increasing stage order."""
        return tuple(s for s, r in enumerate(self.stage_to_rank) if r == rank)

    @property
    def is_vshape(self) -> bool:
        return self == Placement.vshape(self.num_ranks) and self.num_ranks > 1


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        raise ScheduleError(f"{name} = {value}: must be a positive integer")
