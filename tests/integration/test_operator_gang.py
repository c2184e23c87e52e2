"""Whole gangs or none, against the real control plane: a real ResourceQuota, the real admission.

A gang is dry-run once per role (rank 0 and one worker), not once per pod. A ResourceQuota with
room for part of a gang refuses the rest at the real create (each dry run is admitted on its own);
one with room for no pod refuses the dry run. In both cases no pod of
the gang is left, the job says why (condition ``GangRefused`` and a ``FailedCreate`` event with
the API server's message), and once the quota has room the whole gang is created. A gang left
partial by an operator killed mid-creation is completed, or rolled back when the quota refuses the
rest of it. An operator SIGKILLed between two creates of a gang (one create held in a real admission
webhook) costs the gang no restart: its successor creates the missing rank.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from admission_hold import admission_hold
from hyperframe.constants import LABEL_GENERATION, LABEL_RANK
from hyperframe.render import RenderContext, render_job
from hyperframe_devcluster.kube import Kubectl, poll
from hyperframe_devcluster.sim import GPU_RESOURCE, GPUS_PER_NODE
from operator_harness import (
    RUNTIME_NAME,
    OperatorProcess,
    condition,
    gpu_job,
    live_pods,
    operator,
    pods,
    rank_pod,
    status,
    wait,
    wait_running_gang,
)

pytestmark = pytest.mark.cluster
__all__ = ["operator"]

_QUOTA_KEY = f"requests.{GPU_RESOURCE}"


def _set_quota(kubectl: Kubectl, namespace: str, *, pods: int) -> None:
    """A ResourceQuota with room for ``pods`` of the test's 8-GPU pods; waits until the quota
    controller has computed its usage (before that the admission plugin refuses every pod)."""
    hard = str(pods * GPUS_PER_NODE)
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpus", "namespace": namespace},
        "spec": {"hard": {_QUOTA_KEY: hard}},
    }
    kubectl.apply([quota])
    poll(
        lambda: kubectl.json("get", "resourcequota", "gpus", "-n", namespace).get("status") or {},
        lambda st: (st.get("hard") or {}).get(_QUOTA_KEY) == hard,
        timeout_s=30,
        what=f"quota {namespace}/gpus computed with {hard} GPUs",
    )


def _quota_used(kubectl: Kubectl, namespace: str) -> str:
    st = kubectl.json("get", "resourcequota", "gpus", "-n", namespace).get("status") or {}
    return str((st.get("used") or {}).get(_QUOTA_KEY, ""))


def _events(kubectl: Kubectl, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.name={name},reason={reason}"
    return list(kubectl.json("get", "events", "-n", namespace, "--field-selector", selector)["items"])


def _refused(op: OperatorProcess, kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any]:
    """Wait for the job to report the refusal with no pod of the gang left; returns its status."""
    st = wait(
        op,
        lambda: status(kubectl, namespace, name),
        lambda s: condition(s, "GangRefused").get("status") == "True",
        what=f"{namespace}/{name} GangRefused",
        timeout_s=30,
    )
    wait(
        op,
        lambda: (live_pods(kubectl, namespace, name), _quota_used(kubectl, namespace)),
        lambda seen: not seen[0] and seen[1] == "0",
        what=f"no pod of {namespace}/{name} left and its quota free",
        timeout_s=30,
    )
    return st


def _pod_creates(op: OperatorProcess) -> float:
    """The operator's pod create requests sent so far, dry runs included (one counter for both)."""
    for line in op.metrics().splitlines():
        match = re.match(r"hyperframe_api_requests_total\{([^}]*)\} (\S+)", line)
        if match and 'verb="create"' in match.group(1) and 'resource="pods"' in match.group(1):
            return float(match.group(2))
    return 0.0


def _quiet_pod_creates(op: OperatorProcess, kubectl: Kubectl, namespace: str) -> float:
    """The pod create counter once no HyperFrameJob outside ``namespace`` exists and the counter
    has not moved for 3 s (nothing else the operator could still create pods for)."""
    wait(
        op,
        lambda: [
            f"{j['metadata']['namespace']}/{j['metadata']['name']}"
            for j in kubectl.json("get", "hyperframejobs", "-A")["items"]
            if j["metadata"]["namespace"] != namespace
        ],
        lambda others: not others,
        what="no job of an earlier test left (their namespaces deleted)",
        timeout_s=300,
    )
    last = (_pod_creates(op), time.monotonic())

    def settled() -> tuple[float, float]:
        nonlocal last
        now = _pod_creates(op)
        if now != last[0]:
            last = (now, time.monotonic())
        return last

    wait(op, settled, lambda seen: time.monotonic() - seen[1] >= 3.0, what="the pod create counter still")
    return last[0]


def test_a_gang_is_dry_run_once_per_role_then_created(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str
) -> None:
    """A 4-pod gang costs 2 dry runs (rank 0 and one worker) and 4 creates. The counter is the
    operator's, for every job it sees: in a session cluster an earlier module's jobs (their
    namespaces still being deleted) are reconciled by this module's fresh operator too, so the
    count starts once no other job is left and the counter has stood still."""
    before = _quiet_pod_creates(operator, kubectl, namespace)
    kubectl.apply([gpu_job("per-role", namespace, nodes=4)])
    wait(
        operator,
        lambda: live_pods(kubectl, namespace, "per-role"),
        lambda ps: len(ps) == 4,
        what="the 4 pods of per-role",
    )
    # Each request is counted as it is sent: once the 4 pods exist, every request of the gang is.
    sent = _pod_creates(operator) - before
    assert sent == 2 + 4, f"{sent} pod create requests (dry runs included) for a 4-pod gang"
    kubectl.run("delete", "hyperframejob", "per-role", "-n", namespace, "--wait=true")


def test_a_quota_with_room_for_part_of_the_gang_leaves_no_pod_and_the_job_says_why(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str
) -> None:
    _set_quota(kubectl, namespace, pods=1)
    kubectl.apply([gpu_job("half-quota", namespace, nodes=2)])
    st = _refused(operator, kubectl, namespace, "half-quota")
    refusal = condition(st, "GangRefused")
    assert refusal["reason"] == "QuotaExceeded", refusal
    assert "exceeded quota: gpus" in refusal["message"], "the API server's own words"
    assert "raise it, lower spec.nodes" in refusal["message"], "the message says what to do"
    assert st["phase"] == "Pending" and st["restarts"] == 0 and st["createRefusals"] >= 1
    events = _events(kubectl, namespace, "half-quota", "FailedCreate")
    assert events and all(e["type"] == "Warning" and "exceeded quota" in e["message"] for e in events)
    # Each pod's dry run passed on its own, so the first refusal came from a real create.
    assert any("refused the creation of pod" in e["message"] for e in events), events
    assert 'hyperframe_gangs_refused_total{reason="QuotaExceeded"}' in operator.metrics()

    # The refusal is retried whole after a backoff: with room for the gang, it is created and runs.
    _set_quota(kubectl, namespace, pods=2)
    gang = wait_running_gang(operator, kubectl, namespace, "half-quota", nodes=2, generation=0)
    assert {p["metadata"]["labels"][LABEL_RANK] for p in gang} == {"0", "1"}
    st = status(kubectl, namespace, "half-quota")
    assert st["restarts"] == 0 and st["createRefusals"] == 0
    assert condition(st, "GangRefused")["status"] == "False"


def test_a_quota_with_room_for_no_pod_is_refused_by_the_dry_run(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str
) -> None:
    _set_quota(kubectl, namespace, pods=0)
    kubectl.apply([gpu_job("no-quota", namespace, nodes=2)])
    st = _refused(operator, kubectl, namespace, "no-quota")
    refusal = condition(st, "GangRefused")
    assert refusal["reason"] == "QuotaExceeded" and "refused the dry run of pod" in refusal["message"]
    assert st["phase"] == "Pending"


@pytest.fixture
def cordoned(kubectl: Kubectl) -> Iterator[list[str]]:
    """Every GPU node cordoned (a pod created now stays unscheduled), uncordoned afterwards."""
    nodes = [
        n["metadata"]["name"]
        for n in kubectl.json("get", "nodes")["items"]
        if GPU_RESOURCE in ((n.get("status") or {}).get("allocatable") or {})
    ]
    for node in nodes:
        kubectl.run("cordon", node)
    try:
        yield nodes
    finally:
        for node in nodes:
            kubectl.run("uncordon", node, check=False)


def _operator_killed_after_rank0(op: OperatorProcess, kubectl: Kubectl, namespace: str, name: str) -> str:
    """The state an operator killed mid-creation leaves: the status of generation 0 written, its
    Service, ConfigMap and the pod of rank 0 created (by the operator's renderer), rank 1 not.
    Returns the uid of the rank-0 pod; the operator runs again when this returns."""
    op.stop(kill=True)
    try:
        kubectl.apply([gpu_job(name, namespace, nodes=2)])
        body = kubectl.json("get", "hyperframejob", name, "-n", namespace)
        kubectl.run(
            "patch", "hyperframejob", name, "-n", namespace, "--subresource=status", "--type=merge",
            "-p", '{"status": {"phase": "Pending", "gangGeneration": 0, "restarts": 0}}',
        )  # fmt: skip
        runtime = kubectl.json("get", "hyperframeruntime", RUNTIME_NAME)
        objects = render_job(body, runtime, RenderContext(gang_generation=0))
        partial = [o for o in objects if o["kind"] != "Pod" or o["metadata"]["labels"][LABEL_RANK] == "0"]
        kubectl.apply(partial, namespace=namespace)
        return str(rank_pod(live_pods(kubectl, namespace, name), 0)["metadata"]["uid"])
    finally:
        op.start()


def test_a_partial_gang_left_by_a_killed_operator_is_completed(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str, cordoned: list[str]
) -> None:
    rank0 = _operator_killed_after_rank0(operator, kubectl, namespace, "half-made")
    wait(
        operator,
        lambda: live_pods(kubectl, namespace, "half-made"),
        lambda ps: len(ps) == 2,
        what="the missing rank created",
    )
    for node in cordoned:
        kubectl.run("uncordon", node)
    gang = wait_running_gang(operator, kubectl, namespace, "half-made", nodes=2, generation=0)
    assert rank_pod(gang, 0)["metadata"]["uid"] == rank0, "the partial gang was completed, not replaced"
    st = status(kubectl, namespace, "half-made")
    assert st["restarts"] == 0 and st["gangGeneration"] == 0


def test_a_partial_gang_the_quota_cannot_complete_is_rolled_back(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str, cordoned: list[str]
) -> None:
    _set_quota(kubectl, namespace, pods=1)
    _operator_killed_after_rank0(operator, kubectl, namespace, "half-stuck")
    st = _refused(operator, kubectl, namespace, "half-stuck")
    assert condition(st, "GangRefused")["reason"] == "QuotaExceeded"
    # Rank 0 holds the quota: the dry run of the missing rank is refused, and rank 0 is deleted.
    events = _events(kubectl, namespace, "half-stuck", "FailedCreate")
    assert any("refused the dry run of pod half-stuck-g0-1" in e["message"] for e in events), events


def _gate_started(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("initContainerStatuses") or ()
    return any(
        "running" in (s.get("state") or {}) or "terminated" in (s.get("state") or {}) for s in statuses
    )


def test_an_operator_killed_between_two_creates_costs_the_gang_no_restart(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    name = "cut-short"
    with admission_hold(kubectl, namespace, name, {"1"}, tmp_path) as hold:
        kubectl.apply([gpu_job(name, namespace, nodes=2, backoff_limit=0)])
        # Rank 0 is created and starts its smoke gate while the create of rank 1 waits in admission.
        _, created = wait(
            operator,
            lambda: (list(hold.held), live_pods(kubectl, namespace, name)),
            lambda seen: bool(seen[0]) and len(seen[1]) == 1 and _gate_started(seen[1][0]),
            what="rank 0 created with its gate started, rank 1's create held",
        )
        operator.stop(kill=True)  # SIGKILL between the two creates
        hold.released.set()  # the held create is refused: rank 1 is never stored
        wait(operator, lambda: list(hold.answered), bool, what="the held create answered")
        assert [p["metadata"]["labels"][LABEL_RANK] for p in pods(kubectl, namespace, name)] == ["0"]
        recorded = status(kubectl, namespace, name).get("gangCreation")
        assert recorded == {"gangGeneration": 0, "ranks": [0, 1]}, "written before the creates"
        rank0 = str(created[0]["metadata"]["uid"])
        operator.start()
        gang = wait_running_gang(operator, kubectl, namespace, name, nodes=2, generation=0)
    assert rank_pod(gang, 0)["metadata"]["uid"] == rank0, "the gang was completed, not replaced"
    st = status(kubectl, namespace, name)
    assert st["restarts"] == 0 and st["gangGeneration"] == 0, condition(st, "Restarting")
    assert "gangCreation" not in st, "dropped once the whole gang was seen"
    every = pods(kubectl, namespace, name)
    keys = [(p["metadata"]["labels"][LABEL_GENERATION], p["metadata"]["labels"][LABEL_RANK]) for p in every]
    assert sorted(keys) == [("0", "0"), ("0", "1")], "no (job, generation, rank) made twice"
