"""The schedule selector's record: everything measured and decided so far, as immutable data.

:mod:`pipeline.selection` reads a :class:`Record` to name the next frame's schedule and returns
the next record after each frame; the run keeps the current one and every snapshot saves it as
JSON (:meth:`Record.to_json`), so a resumed run continues from exactly what was measured and
decided. This module holds only the data and its JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from hyperframe_runtime.schedule.ir import Placement

__all__ = ["DRIFT_FRAMES", "Candidate", "Check", "Record", "Role", "Step", "Verdict"]

DRIFT_FRAMES: Final = 5
"""Consecutive drifted frames before a re-plan (one noisy frame is not a change)."""

Role = Literal["explore", "wait", "exploit", "recheck", "cross", "challenge"]
"""Why a frame runs its schedule: measured while exploring; the best so far while a plan is
made; the winner; a paired check of a runner-up on the winner's placement, of one on another
placement, or of a re-planned order."""


@dataclass(frozen=True)
class Candidate:
    """A schedule the hyperframe policy may run: torch's (``torch_schedule``) or the planner's."""

    name: str
    placement: Placement
    torch_schedule: str = ""
    """``schedule.baselines`` name; "" for the planner's plan on ``placement``."""

    @property
    def is_planner(self) -> bool:
        return not self.torch_schedule


@dataclass(frozen=True)
class Step:
    """What the next frame runs."""

    name: str
    warm: bool
    """An unmeasured warm-up frame (the first on a new placement)."""
    exploring: bool
    """Not the winner's steady pace: exploring, a paired check, or a warm-up (exploration cost)."""
    gather: bool
    """The frame's op timings must be gathered from every rank (to calibrate and plan)."""
    role: Role = "exploit"

    @property
    def challenge(self) -> bool:
        """The frame runs the re-planned order that challenges the winner (not ``name``'s plan)."""
        return self.role == "challenge"


@dataclass(frozen=True)
class Check:
    """A paired check in flight: ``name``'s frame between two of the winner's."""

    name: str
    role: Role
    before_s: float
    """The winner's last measured frame before the check."""
    check_s: float
    """The check frame's time."""


@dataclass(frozen=True)
class Verdict:
    """What a transition decided, besides the new record."""

    events: tuple[str, ...] = ()
    """Decisions to log, oldest first."""
    adopted: str = ""
    """A challenger won: its re-planned order replaces the plan of this candidate."""
    rejected: str = ""
    """A challenger lost: its re-planned order is discarded."""


@dataclass(frozen=True)
class Record:
    """Everything the selector measured and decided (immutable; JSON in every snapshot)."""

    queue: tuple[str, ...] = ()
    """Candidates still to explore, in order."""
    ready: frozenset[str] = frozenset()
    """Candidates that have a plan (torch's always do; the planner's once planned)."""
    times: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    """Measured frame times of each candidate (exploring, checks and the winner's own frames)."""
    predicted: Mapping[str, float] = field(default_factory=dict)
    peaks: Mapping[str, float] = field(default_factory=dict)
    """Each candidate's predicted activation peak (the tie-break of :data:`TIE_MARGIN`)."""
    calibrated: frozenset[Placement] = frozenset()
    excluded: frozenset[str] = frozenset()
    """Never run again: over the memory budget, the same order as another, not worth moving."""
    placement: Placement | None = None
    """Placement of the frame that ran last (None before the first frame)."""
    frames: int = 0
    """Frames observed."""
    winner: str = ""
    challenger: str = ""
    """A re-planned order of this candidate challenges the winner ("" = none)."""
    planning: bool = False
    check: Check | None = None
    pairs: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    """Paired ratios (check / winner) against the current winner, per checked schedule."""
    settled: Mapping[str, int] = field(default_factory=dict)
    """Schedules settled behind the current winner, and the frame they were settled at."""
    recent: tuple[float, ...] = ()
    """The winner's last measured frames (the exploration-cost pace)."""
    since_gather: int = 0
    since_plan: int = 0
    since_recheck: int = 0
    since_cross: int = 0
    drifted: int = 0
    drift_needed: int = DRIFT_FRAMES
    explore_s: tuple[float, ...] = ()
    """Frame time of every exploring frame after the run's first (for the exploration cost)."""

    @property
    def exploring(self) -> bool:
        return not self.winner

    # ---- JSON ----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        def place(p: Placement | None) -> list[int] | None:
            return None if p is None else list(p.stage_to_rank)

        return {
            "queue": list(self.queue),
            "ready": sorted(self.ready),
            "times": {n: list(t) for n, t in self.times.items()},
            "predicted": dict(self.predicted),
            "peaks": dict(self.peaks),
            "calibrated": sorted(list(p.stage_to_rank) for p in self.calibrated),
            "excluded": sorted(self.excluded),
            "placement": place(self.placement),
            "frames": self.frames,
            "winner": self.winner,
            "challenger": self.challenger,
            "planning": self.planning,
            "check": None
            if self.check is None
            else [self.check.name, self.check.role, self.check.before_s, self.check.check_s],
            "pairs": {n: list(t) for n, t in self.pairs.items()},
            "settled": dict(self.settled),
            "recent": list(self.recent),
            "since_gather": self.since_gather,
            "since_plan": self.since_plan,
            "since_recheck": self.since_recheck,
            "since_cross": self.since_cross,
            "drifted": self.drifted,
            "drift_needed": self.drift_needed,
            "explore_s": list(self.explore_s),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Record:
        check = data.get("check")
        placement = data.get("placement")
        return cls(
            queue=tuple(data["queue"]),
            ready=frozenset(data["ready"]),
            times={n: tuple(float(x) for x in t) for n, t in data["times"].items()},
            predicted={n: float(x) for n, x in data["predicted"].items()},
            peaks={n: float(x) for n, x in data["peaks"].items()},
            calibrated=frozenset(Placement(tuple(p)) for p in data["calibrated"]),
            excluded=frozenset(data["excluded"]),
            placement=None if placement is None else Placement(tuple(placement)),
            frames=int(data["frames"]),
            winner=str(data["winner"]),
            challenger=str(data["challenger"]),
            planning=bool(data["planning"]),
            check=None if check is None else Check(str(check[0]), check[1], float(check[2]), float(check[3])),
            pairs={n: tuple(float(x) for x in t) for n, t in data["pairs"].items()},
            settled={n: int(f) for n, f in data["settled"].items()},
            recent=tuple(float(x) for x in data["recent"]),
            since_gather=int(data["since_gather"]),
            since_plan=int(data["since_plan"]),
            since_recheck=int(data["since_recheck"]),
            since_cross=int(data["since_cross"]),
            drifted=int(data["drifted"]),
            drift_needed=int(data["drift_needed"]),
            explore_s=tuple(float(x) for x in data["explore_s"]),
        )
