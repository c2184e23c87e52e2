"""Run policy: activeDeadlineSeconds, ttlSecondsAfterFinished and cleanPodPolicy, as pure rules.

Suspension is decided in the state machine (it changes the phase); the rules here only answer
"has time run out?" and "which pods go when the job is over?".
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from .facts import CleanPodPolicy, RunPolicy
from .observed import ObservedPod
from .plan import PodDeletion

__all__ = ["deadline_at", "pods_to_clean", "ttl_expires_at"]


def deadline_at(policy: RunPolicy, start_time: datetime | None) -> datetime | None:
    """When the job runs out of time, counted from its (last) start; None without a deadline."""
    if policy.active_deadline_seconds is None or start_time is None:
        return None
    return start_time + timedelta(seconds=policy.active_deadline_seconds)


def ttl_expires_at(policy: RunPolicy, completion_time: datetime | None) -> datetime | None:
    """When a finished job is deleted; None when it is kept."""
    if policy.ttl_seconds_after_finished is None or completion_time is None:
        return None
    return completion_time + timedelta(seconds=policy.ttl_seconds_after_finished)


def pods_to_clean(
    pods: Sequence[ObservedPod], policy: CleanPodPolicy, *, everything: bool = False
) -> tuple[PodDeletion, ...]:
    """Pods to delete once the job is over (``everything`` for deadline and suspension)."""
    doomed: list[ObservedPod] = []
    for pod in pods:
        if pod.deleting_since is not None:
            continue
        if (
            everything
            or policy == CleanPodPolicy.ALL
            or (policy == CleanPodPolicy.RUNNING and pod.phase not in ("Succeeded", "Failed"))
        ):
            doomed.append(pod)
    return tuple(PodDeletion(name=p.name, uid=p.uid) for p in doomed)
