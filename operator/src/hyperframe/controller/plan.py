"""The output of one reconcile: the new status and the actions that drive the cluster towards it.

Applied in this order by the reconciler: the status (once, with the resourceVersion it was computed
from), then deletions and creations (in parallel), then events. Writing the decision first means a
crash in between leaves a status whose intent the next reconcile re-applies; nothing is lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from .status import JobStatus

__all__ = ["Event", "EventType", "Plan", "PodDeletion"]


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    type: EventType
    reason: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PodDeletion:
    name: str
    uid: str
    """The deletion's precondition: a newer pod that took the name is left alone."""
    force: bool = False
    """Grace period 0: the pod sits on a NotReady node or in Terminating past the grace period."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    status: JobStatus
    create_ranks: tuple[int, ...] = ()
    """Ranks of the current gang generation to create (with the Service, ConfigMap and PodGroup)."""
    delete_pods: tuple[PodDeletion, ...] = ()
    delete_job: bool = False
    """ttlSecondsAfterFinished has passed."""
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None
    """Seconds until a time-based rule (backoff, deadline, TTL, grace) may change the decision."""
    gate_failures: tuple[str, ...] = field(default=())
    """Failed smoke checks seen in this reconcile, for the gate-failure metric."""
