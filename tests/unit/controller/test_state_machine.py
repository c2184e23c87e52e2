"""The reconcile state machine: phases, conditions, gang restarts, node exclusion, run policy.

Each test feeds (job, stored status, observed pods, nodes, now) to the pure ``reconcile`` and checks
the plan; several walk a job through successive reconciles the way the operator does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from controller_builders import SETTINGS, T0, Pod, at, cordoned, job, not_ready, ready
from gate_reports import gate_message
from hyperframe.constants import SmokeExit, TrainExit
from hyperframe.controller.facts import CleanPodPolicy, JobFacts, UnschedulableAction
from hyperframe.controller.observed import NodeState, ObservedPod
from hyperframe.controller.plan import Plan
from hyperframe.controller.state_machine import reconcile
from hyperframe.controller.status import ConditionType as C
from hyperframe.controller.status import JobStatus, Phase

NODES = {n: ready(n) for n in ("n1", "n2", "n3")}


def run(
    j: JobFacts,
    status: JobStatus,
    pods: Sequence[ObservedPod] = (),
    *,
    now_s: float = 0,
    nodes: Mapping[str, NodeState] = NODES,
) -> Plan:
    return reconcile(j, status, pods, nodes, at(now_s), SETTINGS)


def started(**changes: object) -> JobStatus:
    """The status after the first reconcile of a 2-node job, as the next status write leaves it once
    the whole gang was seen (``gangCreation`` cleared; pass it to keep one)."""
    status = run(job(), JobStatus()).status
    return status.replace(**{"gang_creation": None, **changes})


def reasons(plan: Plan) -> list[str]:
    return [e.reason for e in plan.events]


def deleted(plan: Plan) -> set[str]:
    return {d.name for d in plan.delete_pods}


def test_new_job_is_pending_and_creates_the_whole_gang() -> None:
    plan = run(job(nodes=3), JobStatus())
    assert plan.status.phase == Phase.PENDING
    assert plan.create_ranks == (0, 1, 2)
    assert plan.status.is_true(C.CREATED)
    assert plan.status.start_time == T0
    assert "Created" in reasons(plan)
    assert plan.status.observed_generation == 1


def test_reconcile_is_idempotent_once_the_status_is_written() -> None:
    first = run(job(), JobStatus())
    stored = first.status.to_dict()
    again = run(job(), JobStatus.from_dict(stored), [Pod(0).obj(), Pod(1).obj()], now_s=1)
    assert again.status.to_patch(stored) == {}
    assert again.events == ()
    assert again.create_ranks == ()


def test_a_gang_held_by_kueue_is_queued_once_and_admitted_when_released() -> None:
    status = started()
    queued = run(job(), status, [Pod(0).queued("gpus").obj(), Pod(1).queued("gpus").obj()], now_s=1)
    assert queued.status.phase == Phase.PENDING
    cond = queued.status.condition(C.QUEUED)
    assert cond is not None and cond.status == "True" and cond.reason == "WaitingForAdmission"
    assert "LocalQueue gpus" in cond.message
    assert reasons(queued) == ["Queued"]

    again = run(job(), queued.status, [Pod(0).queued("gpus").obj(), Pod(1).queued("gpus").obj()], now_s=2)
    assert again.events == ()

    admitted = run(
        job(), again.status, [Pod(0).on("n1").gate_running().obj(), Pod(1).on("n2").obj()], now_s=3
    )
    assert not admitted.status.is_true(C.QUEUED)
    assert admitted.status.phase == Phase.SMOKE_TESTING
    assert "Admitted" in reasons(admitted)


def test_a_gang_kueue_preempts_is_recreated_without_counting_a_restart() -> None:
    status = started(phase=Phase.RUNNING, restarts=0)
    pods = [Pod(0).on("n1").running().stopped_by_kueue(at(1)).obj(), Pod(1).on("n2").running().obj()]
    plan = run(job(), status, pods, now_s=1)
    assert plan.status.phase == Phase.RESTARTING
    assert plan.status.restarts == 0 and plan.status.gang_generation == 1
    assert "Preempted" in reasons(plan)
    cond = plan.status.condition(C.RESTARTING)
    assert cond is not None and cond.reason == "Preempted" and "not counted" in cond.message
    assert deleted(plan) == {pods[1].name}, "the rest of the gang goes with it"


def test_preemption_at_the_backoff_limit_still_requeues_but_a_failure_fails() -> None:
    status = started(phase=Phase.RUNNING, restarts=1)
    preempted = [Pod(0).on("n1").running().stopped_by_kueue(at(1)).obj(), Pod(1).on("n2").running().obj()]
    plan = run(job(backoff_limit=1), status, preempted, now_s=1)
    assert plan.status.phase == Phase.RESTARTING and plan.status.restarts == 1

    failed = [Pod(0).on("n1").exited(1).obj(), Pod(1).on("n2").running().obj()]
    assert run(job(backoff_limit=1), status, failed, now_s=1).status.phase == Phase.FAILED


def test_trainers_that_exit_preempted_restart_the_gang_without_counting_even_at_the_limit() -> None:
    # A node drain SIGTERMs one pod; every rank stops at the same frame boundary and exits
    # TrainExit.PREEMPTED, so the other pod follows (here: seen while still running).
    status = started(phase=Phase.RUNNING, restarts=1)
    pods = [Pod(0).on("n1").exited(TrainExit.PREEMPTED).obj(), Pod(1).on("n2").running().obj()]
    plan = run(job(backoff_limit=1), status, pods, now_s=1)
    assert plan.status.phase == Phase.RESTARTING
    assert plan.status.restarts == 1 and plan.status.gang_generation == 1
    cond = plan.status.condition(C.RESTARTING)
    assert cond is not None and cond.reason == "Preempted" and "not counted" in cond.message
    assert "exit code 75" in cond.message and "rank 0" in cond.message
    assert deleted(plan) == {p.name for p in pods}


def test_a_pod_evicted_by_a_drain_restarts_the_gang_uncounted_before_its_exit_is_seen() -> None:
    # kubectl drain: the Eviction API sets DisruptionTarget/EvictionByEvictionAPI, then deletes the pod.
    status = started(phase=Phase.RUNNING, restarts=1)
    pods = [
        Pod(0).on("n1").running().disrupted("EvictionByEvictionAPI", at(1)).obj(),
        Pod(1).on("n2").running().obj(),
    ]
    plan = run(job(backoff_limit=1), status, pods, now_s=2)
    assert plan.status.phase == Phase.RESTARTING
    assert plan.status.restarts == 1 and plan.status.gang_generation == 1
    cond = plan.status.condition(C.RESTARTING)
    assert cond is not None and cond.reason == "Preempted" and "not counted" in cond.message
    assert "EvictionByEvictionAPI" in cond.message and "n1" in cond.message
    assert deleted(plan) == {pods[1].name}


def test_a_pod_preempted_by_the_scheduler_is_a_preemption_even_when_it_ends_failed() -> None:
    status = started(phase=Phase.RUNNING, restarts=0)
    killed = Pod(0).on("n1").exited(137).disrupted("PreemptionByScheduler", at(1)).obj()
    plan = run(job(backoff_limit=0), status, [killed, Pod(1).on("n2").running().obj()], now_s=2)
    assert plan.status.phase == Phase.RESTARTING and plan.status.restarts == 0
    cond = plan.status.condition(C.RESTARTING)
    assert cond is not None and cond.reason == "Preempted" and "PreemptionByScheduler" in cond.message


def test_a_pod_deleted_for_a_lost_node_is_a_counted_failure_even_next_to_a_preemption() -> None:
    status = started(phase=Phase.RUNNING, restarts=0)
    pods = [
        Pod(0).on("n1").running().disrupted("DeletionByTaintManager", at(1)).obj(),
        Pod(1).on("n2").running().disrupted("EvictionByEvictionAPI", at(1)).obj(),
    ]
    plan = run(job(), status, pods, now_s=2)
    assert plan.status.phase == Phase.RESTARTING and plan.status.restarts == 1
    cond = plan.status.condition(C.RESTARTING)
    assert cond is not None and cond.reason == "NodeLost" and "DeletionByTaintManager" in cond.message


def test_a_running_pod_deleted_without_a_disruption_is_judged_by_its_exit_not_its_deletion() -> None:
    # A plain `kubectl delete pod`: the trainer gets SIGTERM and exits 75 within its grace period.
    status = started(phase=Phase.RUNNING, restarts=0)
    dying = Pod(0).on("n1").running().deleting(at(1)).obj()
    other = Pod(1).on("n2").running().obj()
    waiting = run(job(), status, [dying, other], now_s=2)
    assert waiting.status.phase == Phase.RUNNING and waiting.status.restarts == 0
    assert waiting.delete_pods == () and waiting.requeue_after is not None
    exited = replace(Pod(0).on("n1").exited(TrainExit.PREEMPTED).obj(), deleting_since=at(1))
    plan = run(job(), status, [exited, other], now_s=3)
    assert plan.status.phase == Phase.RESTARTING and plan.status.restarts == 0
    stuck = run(job(), status, [dying, other], now_s=61)
    assert [d.name for d in stuck.delete_pods if d.force] == [dying.name], "bounded by the terminating grace"
    gone = run(job(), status, [other], now_s=62)
    assert gone.status.phase == Phase.RESTARTING and gone.status.restarts == 1


def test_a_preempted_exit_next_to_a_crash_counts_as_the_crash() -> None:
    status = started(phase=Phase.RUNNING, restarts=1)
    pods = [Pod(0).on("n1").exited(TrainExit.PREEMPTED).obj(), Pod(1).on("n2").exited(1).obj()]
    plan = run(job(backoff_limit=1), status, pods, now_s=1)
    assert plan.status.phase == Phase.FAILED
    failed = plan.status.condition(C.FAILED)
    assert failed is not None and failed.reason == "BackoffLimitExceeded"


def test_a_trainer_config_error_fails_the_job_at_once() -> None:
    pods = [Pod(0).on("n1").exited(TrainExit.CONFIG).obj(), Pod(1).on("n2").running().obj()]
    plan = run(job(), started(phase=Phase.RUNNING), pods)
    assert plan.status.phase == Phase.FAILED and plan.status.restarts == 0
    assert "exited with code 2 (configuration error)" in plan.status.message


def test_a_job_without_a_queue_never_gets_a_queued_condition() -> None:
    plan = run(job(), started(), [Pod(0).on("n1").obj(), Pod(1).on("n2").obj()], now_s=1)
    assert plan.status.condition(C.QUEUED) is None


def test_gate_running_is_smoke_testing_then_passed_then_running() -> None:
    status = started()
    testing = run(job(), status, [Pod(0).on("n1").gate_running().obj(), Pod(1).on("n2").obj()])
    assert testing.status.phase == Phase.SMOKE_TESTING
    assert testing.status.is_true(C.SMOKE_TESTING)

    pods = [Pod(0).on("n1").gate_passed().obj(), Pod(1).on("n2").gate_passed().obj()]
    passed = run(job(), testing.status, pods)
    assert passed.status.is_true(C.SMOKE_TEST_PASSED)
    assert not passed.status.is_true(C.SMOKE_TESTING)
    smoke = passed.status.smoke_test
    assert smoke is not None and smoke["passed"] is True and smoke["busBandwidthGBps"] == 180.0
    assert {n["node"] for n in smoke["nodes"]} == {"n1", "n2"}
    assert smoke["nodes"][0]["devices"][0]["figures"]["tflops"] == 700.0

    running = run(job(), passed.status, [Pod(0).on("n1").running().obj(), Pod(1).on("n2").running().obj()])
    assert running.status.phase == Phase.RUNNING
    assert running.status.is_true(C.RUNNING)
    assert "Running" in reasons(running)


def bad_gate(rank: int, node: str, *, bad: tuple[int, ...], generation: int = 0) -> ObservedPod:
    """Rank ``rank``'s pod on ``node`` after the gate's device check failed on node ranks ``bad``."""
    return (
        Pod(rank, generation)
        .on(node)
        .reported(SmokeExit.FAIL, gate_message(rank, node, bad_node_ranks=bad))
        .obj()
    )


def test_gate_failure_excludes_the_node_and_restarts_the_whole_gang() -> None:
    status = started()
    pods = [bad_gate(0, "n1", bad=(0,)), Pod(1).on("n2").gate_running().obj()]
    plan = run(job(), status, pods, now_s=5)
    assert plan.status.phase == Phase.RESTARTING
    assert plan.status.excluded_nodes == ("n1",)
    assert plan.status.restarts == 1 and plan.status.gang_generation == 1
    assert deleted(plan) == {"j-g0-0", "j-g0-1"}
    assert plan.status.is_true(C.SMOKE_TEST_FAILED)
    failed = plan.status.condition(C.SMOKE_TEST_FAILED)
    assert failed is not None and "n1" in failed.message and "device.count" in failed.message
    assert {"SmokeTestFailed", "NodeExcluded", "Restarting"} <= set(reasons(plan))
    assert plan.requeue_after == 10  # first backoff
    assert plan.gate_failures == ("device.count",)
    assert plan.create_ranks == ()


def test_only_the_node_at_fault_is_excluded_not_the_healthy_one_it_failed() -> None:
    # Both gates fail (the real gate fails every node of the gang), but only node rank 1's device
    # is missing: node rank 0's report blames node rank 1, not itself.
    pods = [bad_gate(0, "n1", bad=(1,)), bad_gate(1, "n2", bad=(1,))]
    plan = run(job(), started(), pods, now_s=5)
    assert plan.status.excluded_nodes == ("n2",)
    assert plan.status.phase == Phase.RESTARTING and plan.status.restarts == 1


def test_a_report_blaming_another_node_excludes_that_node_even_before_its_own_report() -> None:
    pods = [bad_gate(0, "n1", bad=(1,)), Pod(1).on("n2").gate_running().obj()]
    plan = run(job(), started(), pods, now_s=5)
    assert plan.status.excluded_nodes == ("n2",)


def test_a_job_wide_busbw_shortfall_excludes_no_node() -> None:
    def low(rank: int, node: str) -> ObservedPod:
        message = gate_message(rank, node, busbw=12.5, min_busbw=100.0)
        return Pod(rank).on(node).reported(SmokeExit.FAIL, message).obj()

    plan = run(job(), started(), [low(0, "n1"), low(1, "n2")], now_s=5)
    assert plan.status.excluded_nodes == ()
    assert "NodeExcluded" not in reasons(plan)
    failed = plan.status.condition(C.SMOKE_TEST_FAILED)
    assert failed is not None and "collective.busbw" in failed.message
    assert plan.status.phase == Phase.RESTARTING and plan.status.restarts == 1


def test_exclusions_stop_where_the_gang_could_no_longer_be_scheduled() -> None:
    # Two schedulable nodes for a gang of two: excluding the bad one would leave the job Pending.
    two = {n: ready(n) for n in ("n1", "n2")}
    pods = [bad_gate(0, "n1", bad=(0,)), bad_gate(1, "n2", bad=(0,))]
    plan = run(job(), started(), pods, now_s=5, nodes=two)
    assert plan.status.excluded_nodes == ()
    assert "NodeExcluded" not in reasons(plan) and "NodeExclusionCapped" in reasons(plan)
    capped = next(e for e in plan.events if e.reason == "NodeExclusionCapped")
    assert "n1" in capped.message and "2 schedulable node(s)" in capped.message
    assert plan.status.phase == Phase.RESTARTING, "the retry on the same nodes counts against backoffLimit"

    # A cordoned or NotReady node does not count as a place the gang could go.
    nodes = {**two, "n3": cordoned("n3"), "n4": not_ready("n4", T0)}
    assert run(job(), started(), pods, now_s=5, nodes=nodes).status.excluded_nodes == ()
    nodes = {**two, "n3": ready("n3")}
    assert run(job(), started(), pods, now_s=5, nodes=nodes).status.excluded_nodes == ("n1",)


def test_earlier_exclusions_count_against_the_cap() -> None:
    status = started(restarts=1, gang_generation=1, excluded_nodes=("n3",))
    pods = [bad_gate(0, "n1", bad=(0,), generation=1), bad_gate(1, "n2", bad=(0,), generation=1)]
    plan = run(job(), status, pods, now_s=5)
    assert plan.status.excluded_nodes == ("n3",)
    assert "NodeExclusionCapped" in reasons(plan)


UNSCHEDULABLE = "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient nvidia.com/gpu."


def pending(rank: int, since_s: float = 0) -> ObservedPod:
    return Pod(rank).unschedulable(at(since_s), UNSCHEDULABLE).obj()


def test_a_gang_unschedulable_past_the_bound_fails_naming_the_scheduler_message() -> None:
    status = started(excluded_nodes=("n3",))
    early = run(job(), status, [pending(0), pending(1, since_s=30)], now_s=100)
    assert early.status.phase == Phase.PENDING
    assert early.status.condition(C.UNSCHEDULABLE) is None
    assert early.requeue_after == 200, "the operator comes back when the bound is reached"

    late = run(job(), early.status, [pending(0), pending(1, since_s=30)], now_s=300)
    assert late.status.phase == Phase.FAILED
    cond = late.status.condition(C.UNSCHEDULABLE)
    assert cond is not None and cond.status == "True" and UNSCHEDULABLE in cond.message
    assert "pod j-g0-0" in cond.message and "n3" in cond.message
    failed = late.status.condition(C.FAILED)
    assert failed is not None and failed.reason == "Unschedulable" and UNSCHEDULABLE in failed.message
    assert "Unschedulable" in reasons(late)
    assert deleted(late) == {"j-g0-0", "j-g0-1"}


def test_with_the_wait_action_an_unschedulable_gang_waits_with_the_condition() -> None:
    settings = replace(SETTINGS, unschedulable_action=UnschedulableAction.WAIT)

    def step(status: JobStatus, pods: Sequence[ObservedPod], now_s: float) -> Plan:
        return reconcile(job(), status, pods, NODES, at(now_s), settings)

    stuck = step(started(), [pending(0), pending(1)], 301)
    assert stuck.status.phase == Phase.PENDING
    cond = stuck.status.condition(C.UNSCHEDULABLE)
    assert cond is not None and cond.status == "True" and "waiting" in cond.message
    assert reasons(stuck).count("Unschedulable") == 1
    again = step(stuck.status, [pending(0), pending(1)], 400)
    assert "Unschedulable" not in reasons(again) and again.status.is_true(C.UNSCHEDULABLE)

    placed = step(again.status, [Pod(0).on("n1").gate_running().obj(), Pod(1).on("n2").obj()], 410)
    cond = placed.status.condition(C.UNSCHEDULABLE)
    assert cond is not None and cond.status == "False" and cond.reason == "Scheduled"


def test_restarted_gang_waits_for_old_pods_and_backoff_then_comes_back() -> None:
    status = run(job(), started(), [bad_gate(0, "n1", bad=(0,)), Pod(1).on("n2").obj()], now_s=5).status
    dying = [Pod(0).on("n1").deleting(at(5)).obj()]
    waiting_old = run(job(), status, dying, now_s=6)
    assert waiting_old.create_ranks == () and waiting_old.status.phase == Phase.RESTARTING
    waiting_backoff = run(job(), status, [], now_s=8)
    assert waiting_backoff.create_ranks == ()
    assert waiting_backoff.requeue_after is not None and 6.9 < waiting_backoff.requeue_after <= 7
    created = run(job(), status, [], now_s=16)
    assert created.create_ranks == (0, 1)
    assert created.status.phase == Phase.PENDING
    assert created.status.gang_generation == 1
    back = run(
        job(),
        created.status,
        [Pod(0, 1).on("n2").running().obj(), Pod(1, 1).on("n3").running().obj()],
        now_s=20,
    )
    assert back.status.phase == Phase.RUNNING
    assert not back.status.is_true(C.RESTARTING)
    assert back.status.excluded_nodes == ("n1",)


def test_gate_config_error_fails_at_once_without_retry() -> None:
    pods = [
        Pod(0).on("n1").gate(SmokeExit.CONFIG, check="config.bad_env").obj(),
        Pod(1).on("n2").gate_running().obj(),
    ]
    plan = run(job(), started(), pods)
    assert plan.status.phase == Phase.FAILED
    assert plan.status.restarts == 0
    failed = plan.status.condition(C.FAILED)
    assert failed is not None and failed.reason == "SmokeTestConfigError"
    assert "j-g0-1" in deleted(plan)  # the still-running pod is cleaned (cleanPodPolicy Running)
    assert plan.status.completion_time is not None


def test_gate_timeout_restarts_without_excluding() -> None:
    pods = [Pod(0).on("n1").gate(SmokeExit.TIMEOUT, check="rendezvous.timeout").obj(), Pod(1).on("n2").obj()]
    plan = run(job(), started(), pods)
    assert plan.status.phase == Phase.RESTARTING
    assert plan.status.excluded_nodes == ()


def test_gate_failures_until_backoff_limit_fail_the_job_with_the_last_reason() -> None:
    status = started(restarts=2, gang_generation=2)
    pods = [bad_gate(0, "n3", bad=(0,), generation=2), Pod(1, 2).on("n2").obj()]
    plan = run(job(backoff_limit=2), status, pods)
    assert plan.status.phase == Phase.FAILED
    failed = plan.status.condition(C.FAILED)
    assert failed is not None and failed.reason == "BackoffLimitExceeded"
    assert "backoffLimit (2)" in failed.message and "device.count" in failed.message
    assert plan.status.excluded_nodes == ("n3",)


def test_worker_failure_while_running_restarts_the_gang_and_counts() -> None:
    running = [Pod(0).on("n1").running().obj(), Pod(1).on("n2").exited(137).obj()]
    plan = run(job(), started(phase=Phase.RUNNING), running)
    assert plan.status.restarts == 1
    assert plan.status.phase == Phase.RESTARTING
    assert deleted(plan) == {"j-g0-0", "j-g0-1"}
    cond = plan.status.condition(C.RESTARTING)
    assert cond is not None and cond.reason == "PodFailed" and "137" in cond.message
    assert plan.status.excluded_nodes == ()


def test_permanent_exit_code_fails_at_once() -> None:
    pods = [Pod(0).on("n1").running().obj(), Pod(1).on("n2").exited(127).obj()]
    plan = run(job(), started(phase=Phase.RUNNING), pods)
    assert plan.status.phase == Phase.FAILED
    assert plan.status.restarts == 0
    assert "command not found" in plan.status.message


def test_rank0_success_succeeds_and_cleans_running_pods_per_policy() -> None:
    pods = [Pod(0).on("n1").exited(0).obj(), Pod(1).on("n2").running().obj()]
    for policy, expect in (
        (CleanPodPolicy.RUNNING, {"j-g0-1"}),
        (CleanPodPolicy.ALL, {"j-g0-0", "j-g0-1"}),
        (CleanPodPolicy.NONE, set()),
    ):
        plan = run(job(clean=policy), started(phase=Phase.RUNNING), pods)
        assert plan.status.phase == Phase.SUCCEEDED
        assert plan.status.is_true(C.SUCCEEDED) and not plan.status.is_true(C.RUNNING)
        assert deleted(plan) == expect, policy


def test_worker_finishing_first_keeps_the_job_running() -> None:
    pods = [Pod(0).on("n1").running().obj(), Pod(1).on("n2").exited(0).obj()]
    plan = run(job(), started(phase=Phase.RUNNING), pods)
    assert plan.status.phase == Phase.RUNNING
    assert plan.delete_pods == ()


def test_deadline_fails_with_deadline_exceeded_and_removes_all_pods() -> None:
    pods = [Pod(0).on("n1").running().obj(), Pod(1).on("n2").running().obj()]
    before = run(job(deadline=60), started(phase=Phase.RUNNING), pods, now_s=50)
    assert before.status.phase == Phase.RUNNING and before.requeue_after == 10
    after = run(job(deadline=60, clean=CleanPodPolicy.NONE), started(phase=Phase.RUNNING), pods, now_s=60)
    assert after.status.phase == Phase.FAILED
    failed = after.status.condition(C.FAILED)
    assert failed is not None and failed.reason == "DeadlineExceeded"
    assert deleted(after) == {"j-g0-0", "j-g0-1"}
    assert "DeadlineExceeded" in reasons(after)


def test_ttl_deletes_the_finished_job_and_never_recreates_pods() -> None:
    done = run(job(ttl=30), started(phase=Phase.RUNNING), [Pod(0).on("n1").exited(0).obj()], now_s=10)
    assert done.status.phase == Phase.SUCCEEDED and done.requeue_after == 30
    early = run(job(ttl=30), done.status, [], now_s=20)
    assert not early.delete_job and early.create_ranks == () and early.requeue_after == 20
    late = run(job(ttl=30), done.status, [], now_s=40)
    assert late.delete_job and late.create_ranks == ()


def test_suspend_deletes_pods_keeps_status_and_resume_recreates() -> None:
    status = started(phase=Phase.RUNNING, restarts=1, gang_generation=1, excluded_nodes=("n3",))
    pods = [Pod(0, 1).on("n1").running().obj(), Pod(1, 1).on("n2").running().obj()]
    suspended = run(job(suspend=True), status, pods, now_s=5)
    assert suspended.status.phase == Phase.SUSPENDED
    assert deleted(suspended) == {"j-g1-0", "j-g1-1"}
    assert suspended.status.restarts == 1 and suspended.status.excluded_nodes == ("n3",)
    assert suspended.status.gang_generation == 2 and suspended.status.start_time is None
    assert suspended.create_ranks == ()
    resumed = run(job(), suspended.status, [], now_s=9)
    assert resumed.status.phase == Phase.PENDING
    assert resumed.create_ranks == (0, 1)
    assert resumed.status.start_time == at(9)
    assert not resumed.status.is_true(C.SUSPENDED) and "Resumed" in reasons(resumed)


def test_job_created_suspended_creates_no_pods() -> None:
    plan = run(job(suspend=True), JobStatus())
    assert plan.status.phase == Phase.SUSPENDED
    assert plan.create_ranks == () and plan.delete_pods == ()
    assert plan.status.gang_generation == 0


def test_pods_on_a_not_ready_node_are_force_deleted_after_the_grace_and_the_gang_restarts() -> None:
    pods = [Pod(0).on("n1").running().obj(), Pod(1).on("n2").running().obj()]
    nodes = {**NODES, "n2": not_ready("n2", since=at(0))}
    early = run(job(), started(phase=Phase.RUNNING), pods, nodes=nodes, now_s=10)
    assert early.status.phase == Phase.RUNNING and early.requeue_after == 20
    late = run(job(), started(phase=Phase.RUNNING), pods, nodes=nodes, now_s=31)
    assert late.status.phase == Phase.RESTARTING
    forced = {d.name for d in late.delete_pods if d.force}
    assert forced == {"j-g0-1"} and deleted(late) == {"j-g0-0", "j-g0-1"}
    cond = late.status.condition(C.RESTARTING)
    assert cond is not None and cond.reason == "NodeNotReady"


def test_pod_stuck_terminating_is_force_deleted() -> None:
    status = started(gang_generation=1, restarts=1, phase=Phase.RESTARTING)
    stuck = [Pod(0, 0).on("n1").deleting(at(0)).obj()]
    assert not any(d.force for d in run(job(), status, stuck, now_s=30).delete_pods)
    assert [d.force for d in run(job(), status, stuck, now_s=61).delete_pods] == [True]


def test_missing_pod_is_created_before_the_gang_starts_and_restarts_it_after() -> None:
    half = run(job(), started(), [Pod(0).on("n1").obj()])
    assert half.create_ranks == (1,) and half.status.restarts == 0
    lost = run(job(), started(phase=Phase.SMOKE_TESTING), [Pod(0).on("n1").gate_running().obj()])
    assert lost.status.phase == Phase.RESTARTING
    cond = lost.status.condition(C.RESTARTING)
    assert cond is not None and cond.reason == "PodDeleted"


def test_deleting_job_gets_an_empty_plan() -> None:
    status = started()
    plan = run(job(deleting=True), status, [Pod(0).obj()])
    assert plan.status == status and plan.delete_pods == () and plan.create_ranks == () and plan.events == ()


def test_old_generation_pods_are_deleted_never_adopted() -> None:
    status = started(gang_generation=2, restarts=2)
    plan = run(job(), status, [Pod(0, 1).on("n1").running().obj(), Pod(0, 2).on("n2").obj()])
    assert deleted(plan) == {"j-g1-0"}
    assert plan.create_ranks == ()  # waits for the old pod to go before completing the new gang


def test_invalid_spec_fails_once_with_every_field_error_and_cleans_pods() -> None:
    from hyperframe.api.errors import FieldError, SpecError
    from hyperframe.controller.state_machine import invalid

    error = SpecError(
        [FieldError("spec.nodes", "0 is < 1", "use at least 1 node"), FieldError("spec.x", "y", "z")]
    )
    plan = invalid(1, JobStatus(), [Pod(0).on("n1").running().obj()], error, T0)
    assert plan.status.phase == Phase.FAILED
    failed = plan.status.condition(C.FAILED)
    assert failed is not None and failed.reason == "InvalidSpec"
    assert "spec.nodes: 0 is < 1: use at least 1 node; spec.x" in failed.message
    assert deleted(plan) == {"j-g0-0"}
    again = invalid(1, plan.status, [], error, at(5))
    assert again.status.to_patch(plan.status.to_dict()) == {} and again.events == ()


def test_hold_keeps_the_plan_but_creates_nothing_and_tells_once() -> None:
    from hyperframe.controller.state_machine import hold

    first = run(job(), JobStatus())
    held = hold(first, "RuntimeNotFound", "spec.runtimeRef.name: not found", recheck_after=15)
    assert held.create_ranks == () and held.requeue_after == 15
    assert held.status.message == "spec.runtimeRef.name: not found"
    assert "RuntimeNotFound" in reasons(held)
    again = hold(run(job(), held.status, now_s=15), "RuntimeNotFound", held.status.message, recheck_after=15)
    assert "RuntimeNotFound" not in reasons(again)


def test_a_finished_pod_on_a_not_ready_node_never_asks_for_an_immediate_requeue() -> None:
    pods = [Pod(0).on("n1").running().obj(), Pod(1).on("n2").exited(0).obj()]
    nodes = {**NODES, "n2": not_ready("n2", since=at(0))}
    plan = run(job(), started(phase=Phase.RUNNING), pods, nodes=nodes, now_s=100)
    assert plan.requeue_after is None or plan.requeue_after >= 0.5


def test_a_finished_job_keeps_its_verdict_when_its_spec_becomes_invalid() -> None:
    from hyperframe.api.errors import FieldError, SpecError
    from hyperframe.controller.state_machine import invalid

    done = run(job(), started(phase=Phase.RUNNING), [Pod(0).on("n1").exited(0).obj()]).status
    plan = invalid(2, done, [], SpecError([FieldError("spec.x", "bad", "fix it")]), at(9))
    assert plan.status.phase == Phase.SUCCEEDED and plan.events == ()


def test_a_lagging_view_never_deletes_a_newer_gang_and_names_the_uid_of_what_it_deletes() -> None:
    """Another replica (the leader before) already moved the job to gang generation 2; this
    replica's view of the job still says 1. Only generation 0 is older than its view."""
    status = started(gang_generation=1, restarts=1, phase=Phase.RESTARTING)
    older = replace(Pod(0, generation=0).running().obj(), uid="uid-g0")
    newer = [replace(Pod(r, generation=2).on("n1").running().obj(), uid=f"uid-g2-{r}") for r in (0, 1)]
    plan = run(job(), status, [older, *newer], now_s=60)
    assert [(d.name, d.uid) for d in plan.delete_pods] == [("j-g0-0", "uid-g0")]
