"""``HyperFrameJob.status`` as plain data: phases, typed condition names, and the condition rules.

The state machine returns a new :class:`JobStatus`; :meth:`JobStatus.to_patch` turns the difference
into the one status write of a reconcile. ``progress`` is written by the progress endpoint while a
job runs; a reconcile carries it unchanged and writes it only when the job is finished (the final
figures, :mod:`~hyperframe.controller.policy_progress`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

__all__ = [
    "Condition",
    "ConditionType",
    "GangCreation",
    "JobStatus",
    "Phase",
    "format_time",
    "parse_time",
    "set_condition",
]


class Phase(StrEnum):
    PENDING = "Pending"
    SMOKE_TESTING = "SmokeTesting"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"

    @property
    def finished(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED)


class ConditionType(StrEnum):
    CREATED = "Created"
    SMOKE_TESTING = "SmokeTesting"
    SMOKE_TEST_PASSED = "SmokeTestPassed"
    SMOKE_TEST_FAILED = "SmokeTestFailed"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUSPENDED = "Suspended"
    QUEUED = "Queued"
    GANG_REFUSED = "GangRefused"
    UNSCHEDULABLE = "Unschedulable"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp as the API server writes it, or None."""
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True, kw_only=True)
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str
    last_transition_time: datetime
    observed_generation: int

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Condition:
        return cls(
            type=str(raw.get("type", "")),
            status=str(raw.get("status", "Unknown")),
            reason=str(raw.get("reason", "")),
            message=str(raw.get("message", "")),
            last_transition_time=parse_time(raw.get("lastTransitionTime")) or datetime.fromtimestamp(0, UTC),
            observed_generation=int(raw.get("observedGeneration", 0) or 0),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": format_time(self.last_transition_time),
            "observedGeneration": self.observed_generation,
        }


def set_condition(
    conditions: tuple[Condition, ...],
    type_: ConditionType,
    status: bool,
    *,
    reason: str,
    message: str,
    now: datetime,
    observed_generation: int,
    new_transition: bool = False,
) -> tuple[Condition, ...]:
    """Conditions with ``type_`` set; lastTransitionTime moves only when the status flips.

    ``new_transition`` moves it anyway: each gang restart is a transition of its own, and the
    restart backoff is measured from it.
    """
    wanted = "True" if status else "False"
    old = next((c for c in conditions if c.type == type_), None)
    keep = old is not None and old.status == wanted and not new_transition
    since = old.last_transition_time if old is not None and keep else now
    new = Condition(
        type=type_,
        status=wanted,
        reason=reason,
        message=message,
        last_transition_time=since,
        observed_generation=observed_generation,
    )
    if old is None:
        return (*conditions, new)
    return tuple(new if c.type == type_ else c for c in conditions)


@dataclass(frozen=True, slots=True, kw_only=True)
class GangCreation:
    """``status.gangCreation``: the ranks of gang generation ``generation`` being created, recorded
    (resourceVersion-checked) before the first create. A rank it names that is missing was never
    created, not created and gone, unless the operator saw a pod of it."""

    generation: int
    ranks: tuple[int, ...]

    @classmethod
    def from_dict(cls, raw: object) -> GangCreation | None:
        if not isinstance(raw, Mapping):
            return None
        ranks = raw.get("ranks") or ()
        return cls(
            generation=int(raw.get("gangGeneration", 0) or 0),
            ranks=tuple(sorted({int(r) for r in ranks if isinstance(r, int)})),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"gangGeneration": self.generation, "ranks": list(self.ranks)}


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStatus:
    """``status`` as a reconcile sees it; ``progress`` is the stored wire form, changed only for a
    finished job."""

    phase: Phase | None = None
    conditions: tuple[Condition, ...] = ()
    restarts: int = 0
    create_refusals: int = 0
    """Gang creations refused in a row (see :mod:`.policy_gang`)."""
    gang_generation: int = 0
    gang_creation: GangCreation | None = None
    """Set while the pods of a gang are being created (see :class:`GangCreation`)."""
    excluded_nodes: tuple[str, ...] = ()
    smoke_test: Mapping[str, Any] | None = None
    """``status.smokeTest`` in its wire form (built by :mod:`~hyperframe.controller.policy_smoke`)."""
    observed_generation: int = 0
    start_time: datetime | None = None
    completion_time: datetime | None = None
    message: str = ""
    progress: Mapping[str, Any] | None = None
    """``status.progress`` in its wire form."""

    def condition(self, type_: ConditionType) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def is_true(self, type_: ConditionType) -> bool:
        cond = self.condition(type_)
        return cond is not None and cond.status == "True"

    def replace(self, **changes: Any) -> JobStatus:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> JobStatus:
        raw = raw or {}
        phase = raw.get("phase")
        return cls(
            phase=Phase(str(phase)) if phase in {p.value for p in Phase} else None,
            conditions=tuple(
                Condition.from_dict(c) for c in raw.get("conditions") or () if isinstance(c, Mapping)
            ),
            restarts=int(raw.get("restarts", 0) or 0),
            create_refusals=int(raw.get("createRefusals", 0) or 0),
            gang_generation=int(raw.get("gangGeneration", 0) or 0),
            gang_creation=GangCreation.from_dict(raw.get("gangCreation")),
            excluded_nodes=tuple(str(n) for n in raw.get("excludedNodes") or ()),
            smoke_test=dict(raw["smokeTest"]) if isinstance(raw.get("smokeTest"), Mapping) else None,
            observed_generation=int(raw.get("observedGeneration", 0) or 0),
            start_time=parse_time(raw.get("startTime")),
            completion_time=parse_time(raw.get("completionTime")),
            message=str(raw.get("message", "") or ""),
            progress=dict(raw["progress"]) if isinstance(raw.get("progress"), Mapping) else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase.value if self.phase else None,
            "conditions": [c.to_dict() for c in self.conditions],
            "restarts": self.restarts,
            "createRefusals": self.create_refusals,
            "gangGeneration": self.gang_generation,
            "gangCreation": self.gang_creation.to_dict() if self.gang_creation is not None else None,
            "excludedNodes": list(self.excluded_nodes),
            "smokeTest": dict(self.smoke_test) if self.smoke_test is not None else None,
            "observedGeneration": self.observed_generation,
            "startTime": format_time(self.start_time) if self.start_time else None,
            "completionTime": format_time(self.completion_time) if self.completion_time else None,
            "message": self.message,
            "progress": dict(self.progress) if self.progress is not None else None,
        }

    def to_patch(self, stored: Mapping[str, Any] | None) -> dict[str, Any]:
        """The merge patch of ``status`` that turns the stored status into ``self`` (empty when equal).

        Compared with the raw stored dict, not a parsed one, so that defaults (``restarts: 0``) are
        written once and show up in ``kubectl get``.
        """
        stored = stored or {}
        patch = {key: value for key, value in self.to_dict().items() if stored.get(key) != value}
        old_progress, new_progress = stored.get("progress"), patch.get("progress")
        if isinstance(old_progress, Mapping) and isinstance(new_progress, dict):
            # A merge patch keeps keys it does not name: a figure the new progress lacks is removed.
            patch["progress"] = {**dict.fromkeys(old_progress), **new_progress}
        return patch
