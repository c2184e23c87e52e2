"""Unschedulable gangs: a gang whose pods the scheduler cannot place never waits silently.

A pod of the current gang that is not bound to a node and whose ``PodScheduled`` condition is
``False`` with reason ``Unschedulable`` is stuck; the gang is as stuck as its longest-stuck pod.
Once that has lasted ``unschedulable_timeout_seconds`` (an operator setting, default 300 s), the
job gets the ``Unschedulable`` condition and a Warning event carrying the scheduler's message, and
then, by ``unschedulable_action``: ``Fail`` (the default) fails the job with reason
``Unschedulable``; ``Wait`` keeps it Pending with the condition until the gang is placed.

Pods held at Kueue's admission gate are ``SchedulingGated``, not ``Unschedulable``: a queued gang is
waiting for quota, which the ``Queued`` condition reports, and is never stuck in this sense.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from .observed import ObservedPod

__all__ = ["StuckGang", "stuck_gang"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StuckGang:
    pod: str
    """The pod that has been unschedulable longest."""
    seconds: float
    """How long it has been unschedulable."""
    scheduler_message: str
    overdue: bool
    """``seconds`` reached the bound: time for the condition, the event and the action."""
    due_in_seconds: float
    """Seconds until the bound (<= 0 once overdue)."""

    def describe(self, timeout_seconds: float, excluded_nodes: Sequence[str]) -> str:
        said = self.scheduler_message or "the scheduler gave no message"
        text = (
            f"pod {self.pod} has been unschedulable for {self.seconds:.0f}s "
            f"(bound {timeout_seconds:g}s): {said}"
        )
        if excluded_nodes:
            text += f"; status.excludedNodes keeps the gang off {', '.join(excluded_nodes)}"
        return text


def stuck_gang(pods: Sequence[ObservedPod], now: datetime, timeout_seconds: float) -> StuckGang | None:
    """The gang's scheduling verdict, or None when no pod of it is unschedulable."""
    stuck = [(p, p.unschedulable) for p in pods if p.active and p.node is None and p.unschedulable]
    if not stuck:
        return None
    pod, verdict = min(stuck, key=lambda s: (s[1].since or now, s[0].rank))
    seconds = max(0.0, (now - (verdict.since or now)).total_seconds())
    return StuckGang(
        pod=pod.name,
        seconds=seconds,
        scheduler_message=verdict.message,
        overdue=seconds >= timeout_seconds,
        due_in_seconds=timeout_seconds - seconds,
    )
