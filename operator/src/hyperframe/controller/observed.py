"""What the operator sees of pods and nodes, reduced to plain data the policies can reason about.

``observe_pod`` and ``observe_node`` are the only places that know the shape of the Kubernetes
objects; the policies see :class:`ObservedPod` and :class:`NodeState` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hyperframe.constants import (
    INIT_CONTAINER_NAME,
    LABEL_GENERATION,
    LABEL_JOB,
    LABEL_RANK,
    MAIN_CONTAINER_NAME,
)

from .status import parse_time

__all__ = [
    "KUEUE_ADMISSION_GATE",
    "ContainerEnd",
    "Disruption",
    "NodeState",
    "ObservedPod",
    "Unschedulable",
    "observe_node",
    "observe_pod",
]

KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"
"""The scheduling gate Kueue's pod webhook adds and removes from the whole group on admission."""
_KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
_KUEUE_STOP_CONDITION = "TerminationTarget"
_DISRUPTION_CONDITION = "DisruptionTarget"


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerEnd:
    """How a container terminated."""

    exit_code: int
    reason: str
    """The kubelet's reason: ``Completed``, ``Error``, ``OOMKilled`` ..."""
    message: str
    """The termination message (the smoke gate writes its JSON report there)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Disruption:
    """A pod's ``DisruptionTarget`` condition while it is ``True``: the API server, the scheduler or a
    controller is about to delete the pod, and says why."""

    reason: str
    """``EvictionByEvictionAPI``, ``PreemptionByScheduler``, ``DeletionByTaintManager``,
    ``DeletionByPodGC``, ``TerminationByKubelet`` ..."""
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Unschedulable:
    """A pod's ``PodScheduled`` condition while it is ``False`` with reason ``Unschedulable``."""

    since: datetime | None
    """The condition's ``lastTransitionTime``."""
    message: str
    """The scheduler's message: which nodes it ruled out and why (affinity, resources, taints)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ObservedPod:
    name: str
    job: str
    rank: int
    generation: int
    phase: str
    """``Pending``, ``Running``, ``Succeeded``, ``Failed`` or ``Unknown``."""
    node: str | None
    deleting_since: datetime | None
    gate_started: bool
    """The smoke-gate init container is running or has terminated."""
    gate_end: ContainerEnd | None
    main_started: bool
    main_end: ContainerEnd | None
    reason: str = ""
    """``status.reason`` of the pod, such as ``Evicted``."""
    message: str = ""
    queue_gated: str | None = None
    """The Kueue LocalQueue holding the pod at its admission gate (not admitted yet), else None."""
    kueue_stopped: str | None = None
    """Why Kueue stopped the pod (its ``TerminationTarget`` condition: preemption, eviction), else None."""
    uid: str = ""
    """``metadata.uid``: a deletion names it as a precondition, so it never hits a newer pod of that name."""
    unschedulable: Unschedulable | None = None
    """The scheduler's verdict while it finds no node for the pod (``PodScheduled=False/Unschedulable``)."""
    disruption: Disruption | None = None
    """Why the pod is being disrupted (its ``DisruptionTarget`` condition), else None."""

    @property
    def gate_passed(self) -> bool:
        return self.gate_end is not None and self.gate_end.exit_code == 0

    @property
    def active(self) -> bool:
        """Neither finished nor being deleted."""
        return self.deleting_since is None and self.phase not in ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeState:
    name: str
    ready: bool
    since: datetime | None
    """When the Ready condition last changed."""
    cordoned: bool = False
    """``spec.unschedulable``: the scheduler binds no new pod here."""


def _terminated(statuses: Any, name: str) -> tuple[bool, ContainerEnd | None]:
    for status in statuses or ():
        if not isinstance(status, Mapping) or status.get("name") != name:
            continue
        state = status.get("state") or {}
        terminated = state.get("terminated")
        if isinstance(terminated, Mapping):
            end = ContainerEnd(
                exit_code=int(terminated.get("exitCode", 0) or 0),
                reason=str(terminated.get("reason") or ""),
                message=str(terminated.get("message") or ""),
            )
            return True, end
        return "running" in state or bool(status.get("started")), None
    return False, None


def observe_pod(body: Mapping[str, Any]) -> ObservedPod | None:
    """The pod as policies see it; None for a pod without valid HyperFrame labels."""
    meta = body.get("metadata") or {}
    labels = meta.get("labels") or {}
    try:
        rank = int(labels[LABEL_RANK])
        generation = int(labels[LABEL_GENERATION])
        job = str(labels[LABEL_JOB])
    except (KeyError, TypeError, ValueError):
        return None
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    gate_started, gate_end = _terminated(status.get("initContainerStatuses"), INIT_CONTAINER_NAME)
    main_started, main_end = _terminated(status.get("containerStatuses"), MAIN_CONTAINER_NAME)
    return ObservedPod(
        name=str(meta.get("name", "")),
        job=job,
        rank=rank,
        generation=generation,
        phase=str(status.get("phase") or "Pending"),
        node=spec.get("nodeName") or None,
        deleting_since=parse_time(meta.get("deletionTimestamp")),
        gate_started=gate_started,
        gate_end=gate_end,
        main_started=main_started,
        main_end=main_end,
        reason=str(status.get("reason") or ""),
        message=str(status.get("message") or ""),
        queue_gated=_queue_gated(spec, labels),
        kueue_stopped=_kueue_stopped(status) if labels.get(_KUEUE_QUEUE_LABEL) else None,
        uid=str(meta.get("uid") or ""),
        unschedulable=_unschedulable(status),
        disruption=_disruption(status),
    )


def _condition(
    status: Mapping[str, Any], type_: str, value: str, reason: str | None = None
) -> Mapping[str, Any] | None:
    """The object's first condition of ``type_`` whose status is ``value`` (and reason ``reason``,
    when given), or None."""
    for cond in status.get("conditions") or ():
        if (
            isinstance(cond, Mapping)
            and cond.get("type") == type_
            and cond.get("status") == value
            and (reason is None or cond.get("reason") == reason)
        ):
            return cond
    return None


def _disruption(status: Mapping[str, Any]) -> Disruption | None:
    cond = _condition(status, _DISRUPTION_CONDITION, "True")
    if cond is None:
        return None
    return Disruption(reason=str(cond.get("reason") or ""), message=str(cond.get("message") or ""))


def _unschedulable(status: Mapping[str, Any]) -> Unschedulable | None:
    cond = _condition(status, "PodScheduled", "False", "Unschedulable")
    if cond is None:
        return None
    return Unschedulable(
        since=parse_time(cond.get("lastTransitionTime")), message=str(cond.get("message") or "")
    )


def _kueue_stopped(status: Mapping[str, Any]) -> str | None:
    cond = _condition(status, _KUEUE_STOP_CONDITION, "True")
    if cond is None:
        return None
    return f"{cond.get('reason') or 'Stopped'}: {cond.get('message') or 'stopped by Kueue'}"


def _queue_gated(spec: Mapping[str, Any], labels: Mapping[str, Any]) -> str | None:
    gates = spec.get("schedulingGates") or ()
    if any(isinstance(g, Mapping) and g.get("name") == KUEUE_ADMISSION_GATE for g in gates):
        return str(labels.get(_KUEUE_QUEUE_LABEL) or "")
    return None


def observe_node(body: Mapping[str, Any]) -> NodeState:
    meta = body.get("metadata") or {}
    cordoned = bool((body.get("spec") or {}).get("unschedulable"))
    for cond in (body.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return NodeState(
                name=str(meta.get("name", "")),
                ready=cond.get("status") == "True",
                since=parse_time(cond.get("lastTransitionTime")),
                cordoned=cordoned,
            )
    return NodeState(name=str(meta.get("name", "")), ready=False, since=None, cordoned=cordoned)
