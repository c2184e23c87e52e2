"""A crash between two creates costs no restart; a pod that went is judged by its last copy.

``status.gangCreation`` records, before the first create of a gang, which ranks are being created.
An operator that takes over a partial gang creates the ranks still missing (same names) instead of
restarting the gang, as long as nothing else of the gang failed or is going. The pod cache keeps the
last copy of each pod that went (the watch's deletion event carries it), so a pod evicted between
two reconciles is still judged by its ``DisruptionTarget`` condition, and a pod seen and gone is
never taken for one that was never created.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from controller_builders import SETTINGS, Pod, at, job, ready
from hyperframe.constants import LABEL_GENERATION, LABEL_JOB, LABEL_RANK
from hyperframe.controller.caches import Caches
from hyperframe.controller.observed import ObservedPod
from hyperframe.controller.plan import Plan
from hyperframe.controller.policy_gang import Refusal
from hyperframe.controller.state_machine import reconcile, refused
from hyperframe.controller.status import ConditionType as C
from hyperframe.controller.status import GangCreation, JobStatus, Phase

NODES = {n: ready(n) for n in ("n1", "n2", "n3")}


def run(
    status: JobStatus,
    pods: Sequence[ObservedPod] = (),
    *,
    now_s: float = 0,
    departed: Sequence[ObservedPod] = (),
    nodes: int = 2,
) -> Plan:
    return reconcile(job(nodes=nodes), status, pods, NODES, at(now_s), SETTINGS, departed=departed)


def created(nodes: int = 2) -> JobStatus:
    """The status the first reconcile writes, before its creates."""
    return run(JobStatus(), nodes=nodes).status


def test_the_ranks_being_created_are_recorded_in_the_status_write_before_the_creates() -> None:
    plan = run(JobStatus(), nodes=3)
    assert plan.create_ranks == (0, 1, 2)
    assert plan.status.gang_creation == GangCreation(generation=0, ranks=(0, 1, 2))
    patch = plan.status.to_patch({})
    assert patch["gangCreation"] == {"gangGeneration": 0, "ranks": [0, 1, 2]}
    assert JobStatus.from_dict(plan.status.to_dict()).gang_creation == plan.status.gang_creation


def test_a_gang_cut_short_by_a_crash_is_completed_not_restarted() -> None:
    # The operator created rank 0 and died; rank 0 has started its smoke gate since.
    partial = [Pod(0).on("n1").gate_running().obj()]
    plan = run(created(), partial, now_s=5)
    assert plan.create_ranks == (1,)
    assert plan.status.restarts == 0 and plan.status.gang_generation == 0
    assert plan.status.phase == Phase.SMOKE_TESTING and not plan.status.is_true(C.RESTARTING)
    assert plan.status.gang_creation == GangCreation(generation=0, ranks=(0, 1))
    # Without the record (the status before this change) the same view was a gang restart.
    old = run(created().replace(gang_creation=None), partial, now_s=5)
    assert old.status.restarts == 1 and old.create_ranks == ()


def test_a_missing_rank_the_record_does_not_name_restarts_the_gang() -> None:
    status = created().replace(gang_creation=GangCreation(generation=0, ranks=(0,)))
    plan = run(status, [Pod(0).on("n1").gate_running().obj()], now_s=5)
    assert plan.status.restarts == 1 and plan.status.phase == Phase.RESTARTING
    assert plan.status.gang_creation is None


def test_a_record_of_an_older_generation_does_not_complete_the_current_one() -> None:
    status = created().replace(gang_generation=1, gang_creation=GangCreation(generation=0, ranks=(0, 1)))
    plan = run(status, [Pod(0, generation=1).on("n1").gate_running().obj()], now_s=5)
    assert plan.status.restarts == 1 and plan.create_ranks == ()


def test_a_partial_gang_with_a_failed_pod_restarts_and_drops_the_record() -> None:
    partial = [Pod(0).on("n1").exited(1).obj()]
    plan = run(created(), partial, now_s=5)
    assert plan.status.restarts == 1 and plan.create_ranks == ()
    assert plan.status.gang_creation is None and plan.status.gang_generation == 1


def test_a_partial_gang_with_a_pod_going_is_not_completed() -> None:
    # Rank 0 is being deleted (no verdict yet: its trainer has not exited): the gang is not whole
    # and cannot be made whole, so the rank never created counts as gone.
    partial = [Pod(0).on("n1").running().deleting(at(4)).obj()]
    plan = run(created(), partial, now_s=5)
    assert plan.create_ranks == () and plan.status.restarts == 1


def test_the_record_is_dropped_with_the_next_status_write_once_the_gang_was_seen_whole() -> None:
    both = [Pod(0).on("n1").obj(), Pod(1).on("n2").obj()]
    quiet = run(created(), both, now_s=1)
    assert quiet.status.to_patch(created().to_dict()) == {}, "no write of its own"
    assert quiet.status.gang_creation is not None
    gate = [Pod(0).on("n1").gate_running().obj(), Pod(1).on("n2").obj()]
    moving = run(created(), gate, now_s=2)
    assert moving.status.phase == Phase.SMOKE_TESTING
    assert moving.status.to_patch(created().to_dict())["gangCreation"] is None


def test_a_pod_seen_and_gone_is_not_taken_for_one_never_created() -> None:
    # Rank 1 was created and seen; its pod went before the record was dropped.
    gone = Pod(1).on("n2").gate_running().obj()
    plan = run(created(), [Pod(0).on("n1").gate_running().obj()], now_s=5, departed=[gone])
    assert plan.create_ranks == () and plan.status.restarts == 1
    cond = plan.status.condition(C.RESTARTING)
    assert cond is not None and cond.reason == "PodDeleted" and gone.name in cond.message


def test_a_pod_evicted_between_two_reconciles_preempts_the_gang_uncounted() -> None:
    """The reconcile runs after the pod is gone (an eviction with a grace period of 0, or one the
    work queue coalesced): its last copy, from the watch's deletion event, carries the reason."""
    status = created().replace(phase=Phase.RUNNING, gang_creation=None)
    evicted = Pod(1).on("n2").running().disrupted("EvictionByEvictionAPI", at(3)).obj()
    last_copy = replace(evicted, deleting_since=None)  # a grace-0 deletion may carry no timestamp
    plan = run(status, [Pod(0).on("n1").running().obj()], now_s=5, departed=[last_copy])
    assert plan.status.phase == Phase.RESTARTING and plan.status.restarts == 0
    cond = plan.status.condition(C.RESTARTING)
    assert cond is not None and cond.reason == "Preempted" and "EvictionByEvictionAPI" in cond.message
    # Unseen (the operator was not watching): counted, as before.
    blind = run(status, [Pod(0).on("n1").running().obj()], now_s=5)
    assert blind.status.restarts == 1


def test_departed_pods_of_another_generation_are_ignored() -> None:
    status = created().replace(phase=Phase.RUNNING, gang_creation=None, gang_generation=1)
    old = Pod(1, generation=0).on("n2").running().disrupted("EvictionByEvictionAPI", at(3)).obj()
    current = [Pod(0, generation=1).on("n1").running().obj(), Pod(1, generation=1).on("n2").running().obj()]
    plan = run(status, current, now_s=5, departed=[old])
    assert plan.status.phase == Phase.RUNNING and plan.status.restarts == 0


def test_a_refused_gang_drops_the_record() -> None:
    refusal = Refusal(status_code=403, kind="Pod", name="j-g0-1", message="exceeded quota", dry_run=False)
    plan = refused(1, created(), [], {"j-g0-0": "uid-0"}, refusal, at(1), SETTINGS)
    assert plan.status.gang_creation is None and plan.status.is_true(C.GANG_REFUSED)


# -- the cache keeps the last copy of a pod that went -----------------------------------------------

KEY = ("ns", "j")


def _pod(rank: int, *, rv: int, generation: int = 0, disruption: str | None = None) -> dict[str, object]:
    conditions = [{"type": "DisruptionTarget", "status": "True", "reason": disruption}] if disruption else []
    return {
        "metadata": {
            "name": f"j-g{generation}-{rank}",
            "namespace": "ns",
            "uid": f"uid-{generation}-{rank}-{rv}",
            "resourceVersion": str(rv),
            "labels": {LABEL_JOB: "j", LABEL_RANK: str(rank), LABEL_GENERATION: str(generation)},
        },
        "status": {"phase": "Running", "conditions": conditions},
    }


def test_the_cache_keeps_the_final_copy_the_deletion_event_carries() -> None:
    caches = Caches()
    caches.pod_event("ADDED", _pod(1, rv=10))
    caches.pod_event("DELETED", _pod(1, rv=12, disruption="EvictionByEvictionAPI"))
    (gone,) = caches.departed_of(KEY)
    assert gone.name == "j-g0-1" and gone.disruption is not None
    assert gone.disruption.reason == "EvictionByEvictionAPI"
    # Created again: the new pod counts, not the copy that went.
    caches.pod_event("ADDED", _pod(1, rv=20))
    assert caches.departed_of(KEY) == []


def test_pods_found_gone_or_missing_from_a_listing_are_kept_as_departed_too() -> None:
    caches = Caches()
    caches.pod_event("ADDED", _pod(0, rv=10))
    caches.pod_event("ADDED", _pod(1, rv=11))
    caches.forget_pod("ns", "j-g0-0", "uid-0-0-10")
    caches.resync_pods([], "30")
    assert sorted(p.name for p in caches.departed_of(KEY)) == ["j-g0-0", "j-g0-1"]
    caches.forget_departed(KEY, ["j-g0-0"])
    assert [p.name for p in caches.departed_of(KEY)] == ["j-g0-1"]
    caches.drop_job(KEY)
    assert caches.departed_of(KEY) == []


def test_only_the_newest_generation_is_kept_as_departed() -> None:
    caches = Caches()
    caches.pod_event("DELETED", _pod(0, rv=10, generation=0))
    caches.pod_event("DELETED", _pod(0, rv=20, generation=1))
    caches.pod_event("DELETED", _pod(1, rv=21, generation=0))  # a late old one
    assert [p.name for p in caches.departed_of(KEY)] == ["j-g1-0"]


# -- a pod that went while the operator was not watching ---------------------------------------------


def _running_after_gates() -> tuple[JobStatus, list[ObservedPod]]:
    """A Running 2-node gang whose gates reported (rank 0 on n1, rank 1 on n2), as stored."""
    pods = [Pod(0).on("n1").running().obj(), Pod(1).on("n2").running().obj()]
    status = run(created(), pods, now_s=1).status
    assert status.phase == Phase.RUNNING and status.gang_creation is None
    return status, pods


def test_the_gate_entries_say_which_generation_they_belong_to() -> None:
    status, _ = _running_after_gates()
    assert status.smoke_test is not None
    assert {(e["rank"], e["node"], e["gangGeneration"]) for e in status.smoke_test["nodes"]} == {
        (0, "n1", 0),
        (1, "n2", 0),
    }


def test_a_pod_gone_unseen_from_a_cordoned_node_is_taken_as_drained() -> None:
    status, pods = _running_after_gates()
    drained = {**NODES, "n2": replace(NODES["n2"], cordoned=True)}
    plan = reconcile(job(), status, pods[:1], drained, at(5), SETTINGS)
    assert plan.status.phase == Phase.RESTARTING and plan.status.restarts == 0
    cond = plan.status.condition(C.RESTARTING)
    assert cond is not None and cond.reason == "Preempted" and "n2 is cordoned" in cond.message


def test_a_pod_gone_unseen_from_a_schedulable_node_is_counted() -> None:
    status, pods = _running_after_gates()
    plan = run(status, pods[:1], now_s=5)
    assert plan.status.restarts == 1
    cond = plan.status.condition(C.RESTARTING)
    assert cond is not None and cond.reason == "PodDeleted"


def test_a_rank_whose_gate_reported_is_never_taken_for_one_not_created() -> None:
    # The record was not dropped yet, but the gate of rank 1 reported: its pod existed.
    status, pods = _running_after_gates()
    status = status.replace(gang_creation=GangCreation(generation=0, ranks=(0, 1)))
    plan = run(status, pods[:1], now_s=5)
    assert plan.create_ranks == () and plan.status.restarts == 1
