"""Whole gangs or none: the refusal rules of the state machine and the gang applier.

The rules are fed to the pure ``reconcile`` / ``refused`` the way the operator calls them, one
reconcile after another; the applier runs against a stand-in for the API server that refuses
what a ResourceQuota with room for some of the gang's pods would refuse.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from controller_builders import SETTINGS, Pod, at, job, ready
from hyperframe.constants import LABEL_RANK, LABEL_ROLE
from hyperframe.controller.gang import create_gang, dry_run_gang
from hyperframe.controller.kube import ApiError
from hyperframe.controller.observed import ObservedPod
from hyperframe.controller.plan import Plan
from hyperframe.controller.policy_gang import Refusal, refusal_reason
from hyperframe.controller.state_machine import reconcile, refused
from hyperframe.controller.status import ConditionType as C
from hyperframe.controller.status import JobStatus, Phase

NODES = {n: ready(n) for n in ("n1", "n2")}
QUOTA_MESSAGE = (
    'pods "j-g0-1" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=8, '
    "used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8"
)


def quota_refusal(*, dry_run: bool = False) -> Refusal:
    return Refusal(status_code=403, kind="Pod", name="j-g0-1", message=QUOTA_MESSAGE, dry_run=dry_run)


def run(status: JobStatus, pods: Sequence[ObservedPod] = (), *, now_s: float = 0, nodes: int = 2) -> Plan:
    return reconcile(job(nodes=nodes), status, pods, NODES, at(now_s), SETTINGS)


def with_uid(pod: Pod, uid: str) -> ObservedPod:
    return replace(pod.obj(), uid=uid)


def deletions(plan: Plan) -> dict[str, str | None]:
    return {d.name: d.uid for d in plan.delete_pods}


def test_a_refused_create_rolls_back_every_pod_of_the_gang_and_waits() -> None:
    first = run(JobStatus())
    assert first.create_ranks == (0, 1)
    # Rank 0 was created (the create answered with its uid), rank 1 was refused by the quota.
    plan = refused(1, first.status, (), {"j-g0-0": "uid-0"}, quota_refusal(), at(0), SETTINGS)
    assert deletions(plan) == {"j-g0-0": "uid-0"}, "the created pod is deleted, with a uid precondition"
    assert plan.create_ranks == ()
    cond = plan.status.condition(C.GANG_REFUSED)
    assert cond is not None and cond.status == "True" and cond.reason == "QuotaExceeded"
    assert QUOTA_MESSAGE in cond.message and "raise it, lower spec.nodes" in cond.message
    assert plan.status.phase == Phase.PENDING and plan.status.create_refusals == 1
    assert plan.status.restarts == 0, "a refusal is not a gang restart"
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "FailedCreate")]
    assert QUOTA_MESSAGE in plan.events[0].message
    assert plan.requeue_after == SETTINGS.restart_backoff_seconds


def test_the_rollback_also_deletes_pods_of_the_gang_the_cache_holds() -> None:
    first = run(JobStatus())
    cached = [with_uid(Pod(0), "uid-0"), with_uid(Pod(1, generation=0).deleting(at(0)), "uid-1")]
    plan = refused(1, first.status, cached, {}, quota_refusal(dry_run=True), at(0), SETTINGS)
    assert deletions(plan) == {"j-g0-0": "uid-0"}, "the pod being deleted already is left alone"
    assert "refused the dry run of pod j-g0-1" in plan.status.message


def test_a_refused_gang_is_retried_whole_after_a_doubling_backoff() -> None:
    status = refused(
        1, run(JobStatus()).status, (), {"j-g0-0": "u0"}, quota_refusal(), at(0), SETTINGS
    ).status
    # The rolled-back pod is still in the cache (its delete has not been seen yet): deleted again.
    waiting = run(status, [with_uid(Pod(0), "u0")], now_s=1)
    assert deletions(waiting) == {"j-g0-0": "u0"} and waiting.create_ranks == ()
    # Still going away: nothing is created under its name.
    gone_soon = run(status, [with_uid(Pod(0).deleting(at(1)), "u0")], now_s=2)
    assert gone_soon.create_ranks == () and not gone_soon.delete_pods
    # Gone, backoff (10 s) not over: wait for the rest of it, without a request.
    early = run(status, (), now_s=4)
    assert early.create_ranks == () and early.requeue_after == 6
    # Due: the whole gang again, the condition says so.
    retry = run(status, (), now_s=10)
    assert retry.create_ranks == (0, 1)
    cond = retry.status.condition(C.GANG_REFUSED)
    assert cond is not None and cond.status == "False" and cond.reason == "Retrying"
    assert "RetryingCreate" in [e.reason for e in retry.events]
    # Refused again: the wait doubles, the count says how many in a row.
    again = refused(1, retry.status, (), {}, quota_refusal(dry_run=True), at(10), SETTINGS)
    assert again.status.create_refusals == 2 and again.requeue_after == 20
    assert run(again.status, (), now_s=29).create_ranks == ()
    assert run(again.status, (), now_s=30).create_ranks == (0, 1)


def test_a_whole_gang_clears_the_refusal() -> None:
    status = refused(1, run(JobStatus()).status, (), {}, quota_refusal(), at(0), SETTINGS).status
    retry = run(status, (), now_s=10)
    whole = run(retry.status, [Pod(0).obj(), Pod(1).obj()], now_s=11)
    assert whole.status.create_refusals == 0 and not whole.delete_pods and whole.create_ranks == ()
    cond = whole.status.condition(C.GANG_REFUSED)
    assert cond is not None and cond.status == "False" and cond.reason == "Created"


def test_an_invalid_object_fails_the_job_and_still_rolls_back() -> None:
    first = run(JobStatus())
    invalid = Refusal(
        status_code=422, kind="Pod", name="j-g0-1", message="spec.volumes[0]: bad", dry_run=False
    )
    plan = refused(1, first.status, [with_uid(Pod(0), "u0")], {"j-g0-1": "u1"}, invalid, at(0), SETTINGS)
    assert plan.status.phase == Phase.FAILED
    failed = plan.status.condition(C.FAILED)
    assert failed is not None and failed.reason == "PodRejected" and "spec.volumes[0]: bad" in failed.message
    assert deletions(plan) == {"j-g0-0": "u0", "j-g0-1": "u1"}


def test_a_partial_gang_left_by_a_crash_is_completed() -> None:
    """The operator stopped after creating rank 0 of 3: the next reconcile creates ranks 1 and 2
    (the applier dry-runs them first; if they are refused, the gang is rolled back as above)."""
    status = run(JobStatus(), nodes=3).status
    plan = run(status, [Pod(0).on("n1").obj()], now_s=1, nodes=3)
    assert plan.create_ranks == (1, 2) and not plan.delete_pods
    assert plan.status.restarts == 0 and plan.status.phase == Phase.PENDING


def test_refusal_reasons_name_the_admission_step() -> None:
    assert refusal_reason(403, QUOTA_MESSAGE) == "QuotaExceeded"
    webhook = 'admission webhook "deny.example.com" denied the request: no GPUs on Fridays'
    assert refusal_reason(400, webhook) == "AdmissionWebhookDenied"
    assert refusal_reason(403, 'pods "x" is forbidden: violates PodSecurity "restricted"') == "Forbidden"
    assert refusal_reason(422, "Pod is invalid") == "PodRejected"


# -- the applier ------------------------------------------------------------------------------


class _QuotaServer:
    """A stand-in for the API server's create endpoint with a pod quota of ``room`` pods: a dry run
    is admitted against what is stored, as the real quota admission does."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.stored: dict[str, dict[str, Any]] = {}
        self.dry_runs: list[str] = []

    async def create(
        self, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any] | None:
        name = str(body["metadata"]["name"])
        if dry_run:
            self.dry_runs.append(name)
        await asyncio.sleep(0)
        if name in self.stored:
            return None
        if body["kind"] == "Pod" and sum(o["kind"] == "Pod" for o in self.stored.values()) >= self.room:
            status = {"message": f'pods "{name}" is forbidden: exceeded quota: pods', "reason": "Forbidden"}
            raise ApiError(403, "Forbidden", json.dumps(status))
        if dry_run:
            return dict(body)
        stored = {**body, "metadata": {**body["metadata"], "uid": f"uid-{name}"}}
        self.stored[name] = stored
        return stored


def _pod(rank: int) -> dict[str, Any]:
    role = "master" if rank == 0 else "worker"
    labels = {LABEL_RANK: str(rank), LABEL_ROLE: role}
    return {"kind": "Pod", "metadata": {"name": f"j-g0-{rank}", "labels": labels}}


def _gang(pods: int, *, ranks: Sequence[int] | None = None) -> list[dict[str, Any]]:
    support = [{"kind": k, "metadata": {"name": "j"}} for k in ("Service", "ConfigMap")]
    return support + [_pod(r) for r in (range(pods) if ranks is None else ranks)]


def _describe(error: ApiError, kind: str) -> str:
    return f"{kind}: {error.message}"


def test_the_dry_run_sends_one_pod_of_each_role() -> None:
    server = _QuotaServer(room=0)
    refusal = asyncio.run(dry_run_gang(server, "ns", _gang(4), _describe))  # type: ignore[arg-type]
    # The Service and ConfigMap are not dry-run: a refusal of either comes before any pod's create.
    # The workers differ only in their names and rank: the first one stands for all of them.
    assert sorted(server.dry_runs) == ["j-g0-0", "j-g0-1"]
    assert refusal is not None and refusal.dry_run and refusal.status_code == 403
    assert refusal.message.startswith("Pod: ") and "exceeded quota" in refusal.message
    assert not server.stored


def test_the_dry_run_of_a_partial_gang_sends_its_first_missing_worker() -> None:
    server = _QuotaServer(room=0)
    gang = _gang(4, ranks=(2, 3))
    refusal = asyncio.run(dry_run_gang(server, "ns", gang, _describe))  # type: ignore[arg-type]
    assert server.dry_runs == ["j-g0-2"]
    assert refusal is not None and refusal.name == "j-g0-2" and refusal.dry_run


def test_create_reports_the_refusal_with_the_pods_it_created() -> None:
    server = _QuotaServer(room=2)
    assert asyncio.run(dry_run_gang(server, "ns", _gang(3), _describe)) is None  # type: ignore[arg-type]
    outcome = asyncio.run(create_gang(server, "ns", _gang(3), _describe))  # type: ignore[arg-type]
    assert outcome.refusal is not None and not outcome.refusal.dry_run
    assert outcome.refusal.kind == "Pod" and outcome.refusal.reason == "QuotaExceeded"
    assert len(outcome.created) == 2
    assert all(uid == f"uid-{name}" for name, uid in outcome.created.items())


def test_pods_going_away_in_a_rollback_are_not_a_gang_failure() -> None:
    """The rolled-back pods show up as deleted (or missing after their gate started): that is the
    rollback, not a failure, so there is no gang restart."""
    status = refused(
        1, run(JobStatus()).status, (), {"j-g0-0": "u0"}, quota_refusal(), at(0), SETTINGS
    ).status
    for pods in (
        [with_uid(Pod(0).on("n1").gate_running().deleting(at(1)), "u0")],
        [with_uid(Pod(0).on("n1").gate_running(), "u0")],
    ):
        plan = run(status, pods, now_s=1)
        assert plan.status.restarts == 0 and plan.status.gang_generation == 0, plan.status.message
        assert plan.status.phase == Phase.PENDING and plan.create_ranks == ()
