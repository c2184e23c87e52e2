"""Failure policy: find what is wrong with the current gang and whether a retry can help.

Any failure restarts the whole gang (NCCL groups cannot re-join one pod at a time). A failure is
permanent when retrying cannot help: the user's command is missing or not executable, the
command line is wrong, the trainer reports a configuration error (``TrainExit.CONFIG``: a job the
trainer cannot run, a user model module that does not import, lacks its factory or has one of the
wrong signature, data that is not there, a snapshot of another model or layout) or the smoke gate
does. A gang that was stopped from outside is preempted, not failed: Kueue stopped it, or its
trainer exited with ``TrainExit.PREEMPTED`` after a SIGTERM (node drain, pod deletion); it is
recreated without counting against backoffLimit. Everything else (other signals, OOM, evictions,
NotReady nodes, exit 1 from a crashed step) is retried up to backoffLimit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from hyperframe.constants import TrainExit

from .facts import PolicySettings
from .observed import NodeState, ObservedPod
from .policy_smoke import GateVerdict

__all__ = [
    "PERMANENT_EXIT_CODES",
    "PREEMPTED",
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
) -> tuple[Failure, ...]:
    """Failures of the current gang generation, gate failures first."""
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
        if pod.kueue_stopped is not None:
            failures.append(
                Failure(
                    reason=PREEMPTED,
                    message=f"Kueue stopped rank {pod.rank} (pod {pod.name}) with the whole gang ({pod.kueue_stopped})",
                    permanent=False,
                    pod=pod.name,
                    node=pod.node,
                )
            )
            continue
        if pod.name in dead_node_pods:
            failures.append(
                Failure(
                    reason="NodeNotReady",
                    message=f"node {pod.node} of rank {pod.rank} (pod {pod.name}) is NotReady",
                    permanent=False,
                    pod=pod.name,
                    node=pod.node,
                )
            )
            continue
        end = pod.main_end
        if end is not None and end.exit_code == TrainExit.PREEMPTED:
            failures.append(
                Failure(
                    reason=PREEMPTED,
                    message=(
                        f"rank {pod.rank} (pod {pod.name} on {pod.node}) stopped on SIGTERM with exit code "
                        f"{end.exit_code} (preempted; it resumes from its last complete snapshot)"
                    ),
                    permanent=False,
                    pod=pod.name,
                    node=pod.node,
                )
            )
        elif end is not None and end.exit_code != 0:
            permanent = is_permanent_exit(end.exit_code)
            why = PERMANENT_EXIT_CODES.get(end.exit_code, end.reason or "error")
            failures.append(
                Failure(
                    reason="PodFailed",
                    message=(
                        f"rank {pod.rank} (pod {pod.name} on {pod.node}) exited with code {end.exit_code} ({why})"
                        + (f": {end.message.strip()[:300]}" if end.message.strip() else "")
                    ),
                    permanent=permanent,
                    pod=pod.name,
                    node=pod.node,
                )
            )
        elif pod.phase == "Failed":
            failures.append(
                Failure(
                    reason="PodFailed",
                    message=(
                        f"rank {pod.rank} (pod {pod.name}) failed: {pod.reason or 'unknown reason'}"
                        + (f": {pod.message}" if pod.message else "")
                    ),
                    permanent=False,
                    pod=pod.name,
                    node=pod.node,
                )
            )
        elif pod.deleting_since is not None:
            failures.append(
                Failure(
                    reason="PodDeleted",
                    message=f"rank {pod.rank} (pod {pod.name}) was deleted while the gang ran",
                    permanent=False,
                    pod=pod.name,
                    node=pod.node,
                )
            )
    present = {p.rank for p in pods}
    missing = [rank for rank in range(num_nodes) if rank not in present]
    if missing and gates.started:
        failures.append(
            Failure(
                reason="PodDeleted",
                message=f"pods of ranks {missing} disappeared after the gang started",
                permanent=False,
            )
        )
    return tuple(failures)


def restart_backoff(restarts: int, settings: PolicySettings) -> float:
    """Seconds to wait before starting gang generation number ``restarts`` (1-based): doubling, capped."""
    if restarts <= 0:
        return 0.0
    return float(
        min(settings.restart_backoff_seconds * 2 ** (restarts - 1), settings.restart_backoff_max_seconds)
    )
