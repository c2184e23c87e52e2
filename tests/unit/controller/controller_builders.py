"""Fluent builders for controller unit tests: pods, nodes and jobs as the policies see them."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hyperframe.controller.facts import CleanPodPolicy, JobFacts, PolicySettings, RunPolicy
from hyperframe.controller.observed import ContainerEnd, Disruption, NodeState, ObservedPod, Unschedulable

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
SETTINGS = PolicySettings(
    restart_backoff_seconds=10,
    restart_backoff_max_seconds=300,
    node_not_ready_grace_seconds=30,
    terminating_grace_seconds=60,
    unschedulable_timeout_seconds=300,
)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def job(
    *,
    nodes: int = 2,
    backoff_limit: int = 3,
    deadline: int | None = None,
    ttl: int | None = None,
    clean: CleanPodPolicy = CleanPodPolicy.RUNNING,
    suspend: bool = False,
    deleting: bool = False,
) -> JobFacts:
    return JobFacts(
        namespace="ns",
        name="j",
        generation=1,
        num_nodes=nodes,
        run_policy=RunPolicy(
            backoff_limit=backoff_limit,
            active_deadline_seconds=deadline,
            ttl_seconds_after_finished=ttl,
            clean_pod_policy=clean,
            suspend=suspend,
        ),
        deleting=deleting,
    )


def gate_message(
    *, ok: bool, exit_code: int, node: str, busbw: float | None = 180.0, check: str | None = None
) -> str:
    report: dict[str, object] = {"version": 1, "ok": ok, "exit_code": exit_code, "node": node}
    if busbw is not None:
        report["busbw_gbps"] = busbw
    report["devices"] = [
        {"index": i, "name": "NVIDIA H100", "tflops": 700.0, "mem_bw_gbps": 3000.0} for i in range(2)
    ]
    if check:
        report.update(failed_check=check, reason=f"{check} on {node}", remedy="drain the node")
    return json.dumps(report)


class Pod:
    """``Pod(rank).on("n1").gate_passed().running().obj()``"""

    def __init__(self, rank: int, generation: int = 0) -> None:
        self._pod = ObservedPod(
            name=f"j-g{generation}-{rank}",
            job="j",
            rank=rank,
            generation=generation,
            phase="Pending",
            node=None,
            deleting_since=None,
            gate_started=False,
            gate_end=None,
            main_started=False,
            main_end=None,
        )

    def on(self, node: str) -> Pod:
        self._pod = replace(self._pod, node=node)
        return self

    def gate_running(self) -> Pod:
        self._pod = replace(self._pod, gate_started=True)
        return self

    def gate(self, exit_code: int, *, check: str | None = None, busbw: float | None = 180.0) -> Pod:
        node = self._pod.node or "?"
        message = gate_message(ok=exit_code == 0, exit_code=exit_code, node=node, busbw=busbw, check=check)
        return self.reported(exit_code, message)

    def reported(self, exit_code: int, message: str) -> Pod:
        """The gate exited with ``exit_code`` after writing ``message`` (see ``gate_reports``)."""
        end = ContainerEnd(
            exit_code=exit_code, reason="Completed" if exit_code == 0 else "Error", message=message
        )
        self._pod = replace(
            self._pod, gate_started=True, gate_end=end, phase="Pending" if exit_code == 0 else "Failed"
        )
        return self

    def gate_passed(self) -> Pod:
        return self.gate(0)

    def running(self) -> Pod:
        self._pod = replace(self.gate_passed()._pod, phase="Running", main_started=True)
        return self

    def exited(self, exit_code: int, message: str = "") -> Pod:
        end = ContainerEnd(
            exit_code=exit_code, reason="Completed" if exit_code == 0 else "Error", message=message
        )
        phase = "Succeeded" if exit_code == 0 else "Failed"
        self._pod = replace(self.running()._pod, phase=phase, main_end=end)
        return self

    def queued(self, queue: str) -> Pod:
        """Held at Kueue's admission gate (the pod webhook's scheduling gate) of LocalQueue ``queue``."""
        self._pod = replace(self._pod, queue_gated=queue)
        return self

    def stopped_by_kueue(self, since: datetime) -> Pod:
        """Deleted by Kueue after it set the pod's TerminationTarget condition (preemption)."""
        self._pod = replace(self._pod, deleting_since=since, kueue_stopped="Preempted: preempted by urgent")
        return self

    def unschedulable(self, since: datetime, message: str) -> Pod:
        """Not bound: the scheduler set ``PodScheduled=False/Unschedulable`` at ``since``."""
        self._pod = replace(self._pod, unschedulable=Unschedulable(since=since, message=message))
        return self

    def deleting(self, since: datetime) -> Pod:
        self._pod = replace(self._pod, deleting_since=since)
        return self

    def disrupted(self, reason: str, since: datetime) -> Pod:
        """Being deleted after the API server set its ``DisruptionTarget`` condition with ``reason``."""
        disruption = Disruption(reason=reason, message=f"{reason} by the test")
        self._pod = replace(self._pod, deleting_since=since, disruption=disruption)
        return self

    def obj(self) -> ObservedPod:
        return self._pod


def ready(name: str) -> NodeState:
    return NodeState(name=name, ready=True, since=T0)


def cordoned(name: str) -> NodeState:
    return NodeState(name=name, ready=True, since=T0, cordoned=True)


def not_ready(name: str, since: datetime) -> NodeState:
    return NodeState(name=name, ready=False, since=since)
