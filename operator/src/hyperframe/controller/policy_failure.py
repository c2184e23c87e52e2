"""Failure policy: find what is wrong with the current gang and whether a retry can help.

Any failure restarts the whole gang (NCCL groups cannot re-join one pod at a time). A failure is
permanent when retrying cannot help: the user's command is missing or not executable, the
command line is wrong, the trainer reports a configuration error (``TrainExit.CONFIG``: a job the
trainer cannot run, a user model module that does not import, lacks its factory or has one of the
wrong signature, data that is not there, a snapshot of another model or layout) or the smoke gate
does. A gang that was stopped from outside is preempted, not failed: Kueue stopped it, or its
trainer exited with ``TrainExit.PREEMPTED`` after a SIGTERM (node drain, pod deletion); it is
recreated without counting against backoffLimit.

A pod being deleted is judged by its ``DisruptionTarget`` condition (decisions in
:data:`PREEMPTING_DISRUPTIONS` and :data:`NODE_LOST_DISRUPTIONS`): an eviction through the
Eviction API (``kubectl drain``) or a scheduler preemption is a preemption; a node lost (the taint
manager or the pod GC deleted it) is a counted failure. A pod deleted without that condition whose
main container has not ended yet is not judged until its exit is seen or it is gone: the wait is
bounded by the terminating grace, after which :func:`stuck_pods` force-deletes it and its missing
rank restarts the gang. Everything else (other signals, OOM, kubelet evictions, NotReady nodes,
exit 1 from a crashed step) is retried up to backoffLimit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime

from hyperframe.constants import TrainExit

from .facts import PolicySettings
from .observed import NodeState, ObservedPod
from .policy_smoke import GateVerdict

__all__ = [
    "NODE_LOST",
    "NODE_LOST_DISRUPTIONS",
    "PERMANENT_EXIT_CODES",
    "PREEMPTED",
    "PREEMPTING_DISRUPTIONS",
    "Failure",
    "find_failures",
    "is_permanent_exit",
    "restart_backoff",
    "stuck_pods",
]

PREEMPTED = "Preempted"
"""Failure reason of a gang stopped from outside: Kueue stopped it (preemption, eviction), or a
trainer exited with ``TrainExit.PREEMPTED`` after a SIGTERM. Recreated (and queued again), not
counted against backoffLimit."""

NODE_LOST = "NodeLost"
"""Failure reason of a pod deleted because its node was lost (counted against backoffLimit)."""

PREEMPTING_DISRUPTIONS: Mapping[str, str] = {
    "EvictionByEvictionAPI": "evicted through the Eviction API (a node drain)",
    "PreemptionByScheduler": "preempted by the scheduler for a higher-priority pod",
}
"""``DisruptionTarget`` reasons of a pod stopped from outside while healthy: a preemption."""

NODE_LOST_DISRUPTIONS: Mapping[str, str] = {
    "DeletionByTaintManager": "deleted by the taint manager (its node is NotReady, unreachable or NoExecute-tainted)",
    "DeletionByPodGC": "deleted by the pod garbage collector (its node is gone)",
}
"""``DisruptionTarget`` reasons of a pod whose node was lost: a counted failure."""

PERMANENT_EXIT_CODES: Mapping[int, str] = {
    int(TrainExit.CONFIG): "configuration error",
    126: "command not executable",
    127: "command not found",
    128: "invalid exit argument",
}
"""Exit codes of the main container that no retry can fix (shell and POSIX conventions)."""


def is_permanent_exit(exit_code: int) -> bool:
    return exit_code in PERMANENT_EXIT_CODES


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    reason: str
    """CamelCase reason for the condition and the event (``PodFailed``, ``NodeNotReady`` ...)."""
    message: str
    permanent: bool
    pod: str | None = None
    node: str | None = None


def stuck_pods(
    pods: Sequence[ObservedPod], nodes: Mapping[str, NodeState], now: datetime, settings: PolicySettings
) -> tuple[set[str], set[str]]:
    """Names of pods to force-delete: (on a node NotReady past the grace, Terminating past the grace)."""
    on_dead_node: set[str] = set()
    terminating: set[str] = set()
    for pod in pods:
        node = nodes.get(pod.node) if pod.node else None
        if (
            node is not None
            and not node.ready
            and node.since is not None
            and (now - node.since).total_seconds() >= settings.node_not_ready_grace_seconds
            and pod.phase not in ("Succeeded", "Failed")
        ):
            on_dead_node.add(pod.name)
        if (
            pod.deleting_since is not None
            and (now - pod.deleting_since).total_seconds() >= settings.terminating_grace_seconds
        ):
            terminating.add(pod.name)
    return on_dead_node, terminating


def find_failures(
    pods: Sequence[ObservedPod],
    *,
    num_nodes: int,
    gates: GateVerdict,
    dead_node_pods: set[str],
    being_created: frozenset[int] = frozenset(),
    departed: Mapping[int, ObservedPod] | None = None,
    gate_nodes: Mapping[int, str] | None = None,
    cordoned: Set[str] = frozenset(),
) -> tuple[Failure, ...]:
    """Failures of the current gang generation, gate failures first.

    A rank with no pod matters once the gang has started its gate (before that it is simply
    created). ``departed`` holds, per rank, the last copy of a pod of it the operator saw before it
    went (the watch's deletion event carries the final object, its ``DisruptionTarget`` included):
    that pod is judged as if it were still there, being deleted. Without one (the operator was not
    watching), a rank whose gate reported from a node (``gate_nodes``, from ``status.smokeTest``)
    was created; if that node is now ``cordoned``, as ``kubectl drain`` leaves it before it
    evicts, the rank is taken as evicted (``Preempted``), else it is ``PodDeleted``. A rank of
    neither kind that is in ``being_created`` (``status.gangCreation``, written before the
    creates) was never created, for example because the operator stopped between two creates: it
    is not a failure while nothing else of the gang failed or is going, and the caller creates it.
    Any other missing rank is ``PodDeleted``.
    """
    failures = [
        Failure(
            reason="SmokeTestConfigError" if g.config_error else "SmokeTestFailed",
            message=g.describe(),
            permanent=g.config_error,
            pod=g.pod,
            node=g.node,
        )
        for g in gates.failures
    ]
    gate_failed = {g.pod for g in gates.failures}
    for pod in sorted(pods, key=lambda p: p.rank):
        if pod.name in gate_failed:
            continue
        failure = _judge_pod(pod, dead_node=pod.name in dead_node_pods)
        if failure is not None:
            failures.append(failure)
    present = {p.rank for p in pods}
    missing = [rank for rank in range(num_nodes) if rank not in present]
    if not missing or not gates.started:
        return tuple(failures)
    seen_gone = {rank: pod for rank, pod in (departed or {}).items() if rank in missing}
    for rank in sorted(seen_gone):
        failures.append(_judge_pod(seen_gone[rank], gone=True) or _deleted(seen_gone[rank]))
    unseen = [r for r in missing if r not in seen_gone]
    ran_on = {r: node for r in unseen if (node := (gate_nodes or {}).get(r))}
    drained = {r: node for r, node in ran_on.items() if node in cordoned}
    for rank, node in drained.items():
        failures.append(
            Failure(
                reason=PREEMPTED,
                message=(
                    f"rank {rank}'s pod went while the operator was not watching, and its node {node} "
                    "is cordoned, as a drain leaves it: taken as evicted through the Eviction API"
                ),
                permanent=False,
                node=node,
            )
        )
    completable = not failures and all(p.deleting_since is None for p in pods)
    never_created = {r for r in unseen if r not in ran_on and r in being_created} if completable else set()
    lost = [r for r in unseen if r not in drained and r not in never_created]
    if lost:
        failures.append(
            Failure(
                reason="PodDeleted",
                message=f"pods of ranks {lost} disappeared after the gang started",
                permanent=False,
            )
        )
    return tuple(failures)


def _deleted(pod: ObservedPod) -> Failure:
    return Failure(
        reason="PodDeleted",
        message=f"rank {pod.rank} (pod {pod.name}) was deleted while the gang ran"
        + (f" ({pod.disruption.reason}: {pod.disruption.message})" if pod.disruption else ""),
        permanent=False,
        pod=pod.name,
        node=pod.node,
    )


def _judge_pod(pod: ObservedPod, *, dead_node: bool = False, gone: bool = False) -> Failure | None:
    """The failure one pod of the current gang shows, if any; ``gone``: its last copy before it
    went (it counts as being deleted)."""
    if pod.kueue_stopped is not None:
        return Failure(
            reason=PREEMPTED,
            message=f"Kueue stopped rank {pod.rank} (pod {pod.name}) with the whole gang ({pod.kueue_stopped})",
            permanent=False,
            pod=pod.name,
            node=pod.node,
        )
    if dead_node:
        return Failure(
            reason="NodeNotReady",
            message=f"node {pod.node} of rank {pod.rank} (pod {pod.name}) is NotReady",
            permanent=False,
            pod=pod.name,
            node=pod.node,
        )
    end = pod.main_end
    deleting = gone or pod.deleting_since is not None
    disruption = pod.disruption.reason if pod.disruption is not None else ""
    if deleting and disruption in PREEMPTING_DISRUPTIONS:
        return Failure(
            reason=PREEMPTED,
            message=(
                f"rank {pod.rank} (pod {pod.name} on {pod.node}) was {PREEMPTING_DISRUPTIONS[disruption]} "
                f"(DisruptionTarget {disruption}; it resumes from its last complete snapshot)"
            ),
            permanent=False,
            pod=pod.name,
            node=pod.node,
        )
    if deleting and disruption in NODE_LOST_DISRUPTIONS:
        return Failure(
            reason=NODE_LOST,
            message=(
                f"rank {pod.rank} (pod {pod.name} on {pod.node}) was {NODE_LOST_DISRUPTIONS[disruption]} "
                f"(DisruptionTarget {disruption})"
            ),
            permanent=False,
            pod=pod.name,
            node=pod.node,
        )
    if end is not None and end.exit_code == TrainExit.PREEMPTED:
        return Failure(
            reason=PREEMPTED,
            message=(
                f"rank {pod.rank} (pod {pod.name} on {pod.node}) stopped on SIGTERM with exit code "
                f"{end.exit_code} (preempted; it resumes from its last complete snapshot)"
            ),
            permanent=False,
            pod=pod.name,
            node=pod.node,
        )
    if end is not None and end.exit_code != 0:
        permanent = is_permanent_exit(end.exit_code)
        why = PERMANENT_EXIT_CODES.get(end.exit_code, end.reason or "error")
        return Failure(
            reason="PodFailed",
            message=(
                f"rank {pod.rank} (pod {pod.name} on {pod.node}) exited with code {end.exit_code} ({why})"
                + (f": {end.message.strip()[:300]}" if end.message.strip() else "")
            ),
            permanent=permanent,
            pod=pod.name,
            node=pod.node,
        )
    if pod.phase == "Failed":
        return Failure(
            reason="PodFailed",
            message=(
                f"rank {pod.rank} (pod {pod.name}) failed: {pod.reason or 'unknown reason'}"
                + (f": {pod.message}" if pod.message else "")
            ),
            permanent=False,
            pod=pod.name,
            node=pod.node,
        )
    if pod.deleting_since is not None and (pod.disruption is not None or not pod.main_started):
        return _deleted(pod)
    return None


def restart_backoff(restarts: int, settings: PolicySettings) -> float:
    """Seconds to wait before starting gang generation number ``restarts`` (1-based): doubling, capped."""
    if restarts <= 0:
        return 0.0
    return float(
        min(settings.restart_backoff_seconds * 2 ** (restarts - 1), settings.restart_backoff_max_seconds)
    )
