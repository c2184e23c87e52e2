"""The reconcile state machine: (job, stored status, pods, nodes, now) -> Plan. Pure; no API calls.

Phases: Pending -> SmokeTesting -> Running -> Succeeded, with Restarting between gang generations,
Failed on a permanent error, an exhausted backoffLimit or the deadline, and Suspended while
``runPolicy.suspend`` is true. The per-policy rules live in the ``policy_*`` modules; this module
only sequences them and records conditions and events.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .facts import CleanPodPolicy, JobFacts, PolicySettings, RunPolicy, UnschedulableAction
from .observed import NodeState, ObservedPod
from .plan import Event, EventType, Plan, PodDeletion
from .policy_exclusion import cap_exclusions
from .policy_failure import PREEMPTED, Failure, find_failures, restart_backoff, stuck_pods
from .policy_gang import Refusal, refusal_backoff, refusal_fix
from .policy_progress import final_progress, rank0_progress
from .policy_run import deadline_at, pods_to_clean, ttl_expires_at
from .policy_schedule import stuck_gang
from .policy_smoke import gate_nodes, judge_gates, merge_smoke_status
from .policy_success import succeeded_rank0
from .status import ConditionType, GangCreation, JobStatus, Phase, set_condition

__all__ = ["hold", "invalid", "reconcile", "refused"]

C = ConditionType
_MIN_REQUEUE_SECONDS = 0.5


@dataclass(kw_only=True)
class _Draft:
    """The plan being built: the status and the actions collected so far."""

    job: JobFacts
    now: datetime
    status: JobStatus
    events: list[Event] = field(default_factory=list)
    deletions: dict[str, PodDeletion] = field(default_factory=dict)
    create: tuple[int, ...] = ()
    requeue: list[float] = field(default_factory=list)
    delete_job: bool = False
    gate_failures: tuple[str, ...] = ()
    gang_seen_whole: bool = False
    """Every pod of the current gang generation is in the cache: ``status.gangCreation`` is done."""

    def cond(self, type_: ConditionType, ok: bool, reason: str, message: str, *, new: bool = False) -> None:
        self.status = self.status.replace(
            conditions=set_condition(
                self.status.conditions,
                type_,
                ok,
                reason=reason,
                message=message,
                now=self.now,
                observed_generation=self.job.generation,
                new_transition=new,
            )
        )

    def clear(self, type_: ConditionType, reason: str, message: str = "") -> None:
        """Set a condition False, but only if it exists (absent means never true)."""
        if self.status.condition(type_) is not None:
            self.cond(type_, False, reason, message)

    def phase(self, phase: Phase, message: str, *, warning: bool = False) -> None:
        if self.status.phase != phase:
            self.status = self.status.replace(phase=phase)
            kind = EventType.WARNING if warning else EventType.NORMAL
            self.event(kind, phase.value, message)

    def event(self, kind: EventType, reason: str, message: str) -> None:
        self.events.append(Event(type=kind, reason=reason, message=message))

    def delete(self, pod: ObservedPod, *, force: bool = False) -> None:
        self.deletions[pod.name] = PodDeletion(name=pod.name, uid=pod.uid, force=force)

    def after(self, seconds: float) -> None:
        # Never "again right now": whatever is due now is already in this plan, and a zero requeue
        # of an unchanged job would spin.
        self.requeue.append(max(seconds, _MIN_REQUEUE_SECONDS))

    def plan(self) -> Plan:
        return Plan(
            status=self.status,
            create_ranks=self.create,
            delete_pods=tuple(self.deletions.values()),
            delete_job=self.delete_job,
            events=tuple(self.events),
            requeue_after=min(self.requeue) if self.requeue else None,
            gate_failures=self.gate_failures,
        )


def reconcile(
    job: JobFacts,
    stored: JobStatus,
    pods: Sequence[ObservedPod],
    nodes: Mapping[str, NodeState],
    now: datetime,
    settings: PolicySettings,
    *,
    departed: Sequence[ObservedPod] = (),
) -> Plan:
    """Decide the next status and actions for one job.

    ``departed``: the last copy the operator saw of each of the job's pods that are gone (see
    :func:`~.policy_failure.find_failures`).
    """
    if job.deleting:
        return Plan(status=stored)
    base = stored.replace(observed_generation=job.generation)
    d = _Draft(job=job, now=now, status=base)
    if stored.phase is None:
        d.status = d.status.replace(phase=Phase.PENDING)
        d.cond(C.CREATED, True, "Created", f"gang of {job.num_nodes} pods")
        d.event(EventType.NORMAL, "Created", f"HyperFrameJob accepted: gang of {job.num_nodes} pods")
    dead, terminating = stuck_pods(pods, nodes, now, settings)
    _force_stuck(d, pods, nodes, dead | terminating, settings)
    phase = d.status.phase
    if phase is not None and phase.finished:
        _finished(d, pods)
    elif job.run_policy.suspend:
        _suspend(d, pods)
    else:
        _active(d, pods, nodes, dead, departed, settings)
    _settle_creation(d, base)
    return d.plan()


def _settle_creation(d: _Draft, base: JobStatus) -> None:
    """Drop ``status.gangCreation`` once every pod of it was seen, in a status write that happens
    anyway (a transition, or a plan that acts): a write of its own would cost one request per gang.
    Until then a rank of it that goes unseen would be created again rather than restart the gang."""
    if d.status.gang_creation is None or not d.gang_seen_whole:
        return
    done = d.status.replace(gang_creation=None)
    if done != base.replace(gang_creation=None) or d.deletions or d.create or d.delete_job:
        d.status = done


def _force_stuck(
    d: _Draft,
    pods: Sequence[ObservedPod],
    nodes: Mapping[str, NodeState],
    stuck: set[str],
    settings: PolicySettings,
) -> None:
    """Force-delete pods on dead nodes or stuck in Terminating; requeue for when a grace runs out."""
    for pod in pods:
        if pod.name in stuck:
            d.delete(pod, force=True)
            continue
        if pod.deleting_since is not None:
            d.after(settings.terminating_grace_seconds - (d.now - pod.deleting_since).total_seconds())
        node = nodes.get(pod.node) if pod.node else None
        if node is not None and not node.ready and node.since is not None and pod.active:
            d.after(settings.node_not_ready_grace_seconds - (d.now - node.since).total_seconds())


def _finished(d: _Draft, pods: Sequence[ObservedPod]) -> None:
    _final_figures(d, pods)  # rank 0 may end after the verdict (a deadline, a worker's permanent error)
    for deletion in pods_to_clean(pods, d.job.run_policy.clean_pod_policy):
        d.deletions.setdefault(deletion.name, deletion)
    expires = ttl_expires_at(d.job.run_policy, d.status.completion_time)
    if expires is None:
        return
    if d.now >= expires:
        d.delete_job = True
        d.event(EventType.NORMAL, "TTLExpired", "ttlSecondsAfterFinished passed; deleting the job")
    else:
        d.after((expires - d.now).total_seconds())


def _suspend(d: _Draft, pods: Sequence[ObservedPod]) -> None:
    if d.status.phase != Phase.SUSPENDED:
        d.cond(C.SUSPENDED, True, "Suspended", "runPolicy.suspend is true: pods deleted, status kept")
        d.clear(C.RUNNING, "Suspended")
        d.clear(C.SMOKE_TESTING, "Suspended")
        if pods:
            # The next gang is a new generation, so a resumed job never adopts a dying pod.
            d.status = d.status.replace(gang_generation=d.status.gang_generation + 1)
        d.status = d.status.replace(start_time=None, gang_creation=None)
        d.phase(Phase.SUSPENDED, "runPolicy.suspend is true: pods deleted")
    for deletion in pods_to_clean(pods, d.job.run_policy.clean_pod_policy, everything=True):
        d.deletions.setdefault(deletion.name, deletion)


def _finish(
    d: _Draft,
    pods: Sequence[ObservedPod],
    phase: Phase,
    reason: str,
    message: str,
    *,
    everything: bool = False,
) -> None:
    ok = phase == Phase.SUCCEEDED
    d.cond(C.SUCCEEDED if ok else C.FAILED, True, reason, message)
    d.clear(C.RUNNING, reason, message)
    d.clear(C.SMOKE_TESTING, reason)
    d.clear(C.RESTARTING, reason)
    d.status = d.status.replace(completion_time=d.now, message=message, gang_creation=None)
    _final_figures(d, pods)
    d.phase(phase, message, warning=not ok)
    if not ok and reason != phase.value:
        d.event(EventType.WARNING, reason, message)
    for deletion in pods_to_clean(pods, d.job.run_policy.clean_pod_policy, everything=everything):
        d.deletions.setdefault(deletion.name, deletion)
    _finished_ttl(d)


def _final_figures(d: _Draft, pods: Sequence[ObservedPod]) -> None:
    """The trainer's final update (rank 0's termination message) into ``status.progress``."""
    reported = rank0_progress(pods, d.status.gang_generation)
    d.status = d.status.replace(progress=final_progress(d.status.progress, reported, d.now))


def _finished_ttl(d: _Draft) -> None:
    expires = ttl_expires_at(d.job.run_policy, d.status.completion_time)
    if expires is not None:
        d.after((expires - d.now).total_seconds())


def _active(
    d: _Draft,
    pods: Sequence[ObservedPod],
    nodes: Mapping[str, NodeState],
    dead: set[str],
    departed: Sequence[ObservedPod],
    settings: PolicySettings,
) -> None:
    job, policy = d.job, d.job.run_policy
    if d.status.phase == Phase.SUSPENDED:
        d.cond(C.SUSPENDED, False, "Resumed", "runPolicy.suspend is false: pods recreated")
        d.status = d.status.replace(phase=Phase.PENDING)
        d.event(EventType.NORMAL, "Resumed", "runPolicy.suspend is false: recreating the gang")
    if d.status.start_time is None:
        d.status = d.status.replace(start_time=d.now)
    deadline = deadline_at(policy, d.status.start_time)
    if deadline is not None and d.now >= deadline:
        message = f"runPolicy.activeDeadlineSeconds ({policy.active_deadline_seconds}) exceeded; pods deleted"
        _finish(d, pods, Phase.FAILED, "DeadlineExceeded", message, everything=True)
        return
    if deadline is not None:
        d.after((deadline - d.now).total_seconds())

    generation = d.status.gang_generation
    current = [p for p in pods if p.generation == generation]
    # Only older generations are stale. A pod of a newer one means this view of the job lags behind
    # another writer's (a replica that led before): it is left alone, and the status write this
    # plan depends on fails on the resourceVersion.
    stale = [p for p in pods if p.generation < generation]
    for pod in stale:
        if pod.deleting_since is None:
            d.delete(pod)
    # A refused gang's pods go away because the operator rolls them back: not a failure of the gang.
    if d.status.is_true(C.GANG_REFUSED) and (stale or not _retry_refused_gang(d, current, settings)):
        return

    gates = judge_gates(current, job.num_nodes)
    if gates.results:
        smoke = merge_smoke_status(d.status.smoke_test, gates, generation=generation)
        d.status = d.status.replace(smoke_test=smoke)

    winner = succeeded_rank0(current)
    if winner is not None:
        _finish(d, pods, Phase.SUCCEEDED, "Succeeded", f"rank 0 (pod {winner.name}) completed successfully")
        return

    record = d.status.gang_creation
    recorded = record.ranks if record is not None and record.generation == generation else ()
    failures = find_failures(
        current,
        num_nodes=job.num_nodes,
        gates=gates,
        dead_node_pods={p.name for p in current if p.name in dead},
        being_created=frozenset(recorded),
        departed={p.rank: p for p in departed if p.generation == generation},
        gate_nodes=gate_nodes(d.status.smoke_test, generation),
        cordoned={n.name for n in nodes.values() if n.cordoned},
    )
    if failures:
        d.gate_failures = tuple(g.failed_check for g in gates.failures)
        _fail_gang(d, pods, current, failures, gates.exclude_nodes, nodes, dead, settings)
        return
    if _unschedulable(d, pods, current, settings):
        return

    if stale:
        # The previous generation is still going away; the new gang waits for its GPUs.
        return
    restarting = d.status.condition(C.RESTARTING)
    if restarting is not None and restarting.status == "True" and not current:
        ready_at = restarting.last_transition_time.timestamp() + restart_backoff(d.status.restarts, settings)
        wait = ready_at - d.now.timestamp()
        if wait > 0:
            d.after(wait)
            return

    present = {p.rank for p in current}
    d.create = tuple(rank for rank in range(job.num_nodes) if rank not in present)
    if d.create:
        # Recorded before the creates (the status write precedes them): an operator that stops
        # between two creates leaves ranks its successor creates, not a gang it restarts.
        ranks = tuple(sorted({*recorded, *d.create}))
        d.status = d.status.replace(gang_creation=GangCreation(generation=generation, ranks=ranks))
    elif len(current) == job.num_nodes:
        d.gang_seen_whole = True
    _progress_phase(d, current, gates.started, gates.all_passed)


def _progress_phase(
    d: _Draft, current: Sequence[ObservedPod], gates_started: bool, gates_passed: bool
) -> None:
    """Pending, SmokeTesting or Running, from how far the complete gang has come."""
    n = d.job.num_nodes
    _queue_state(d, current)
    complete = len(current) == n and not d.create
    running = complete and all(p.phase == "Running" and p.main_started for p in current)
    if complete and d.status.create_refusals:
        d.status = d.status.replace(create_refusals=0)
        d.clear(C.GANG_REFUSED, "Created", f"every pod of gang generation {d.status.gang_generation} exists")
    if gates_passed and complete:
        d.cond(C.SMOKE_TESTING, False, "Passed", "every node passed the smoke gate")
        if not d.status.is_true(C.SMOKE_TEST_PASSED):
            d.cond(C.SMOKE_TEST_PASSED, True, "Passed", f"all {n} nodes passed the device and NCCL checks")
            d.clear(C.SMOKE_TEST_FAILED, "Passed")
            d.event(EventType.NORMAL, "SmokeTestPassed", f"all {n} nodes passed the smoke gate")
    if running:
        d.cond(C.RUNNING, True, "Running", f"all {n} pods are running")
        d.clear(C.RESTARTING, "Running", f"gang generation {d.status.gang_generation} is running")
        d.phase(Phase.RUNNING, f"all {n} pods are running")
    elif d.status.phase == Phase.RUNNING:
        pass  # a worker finished before rank 0: rank 0 decides
    elif gates_started:
        if not gates_passed:
            d.cond(C.SMOKE_TESTING, True, "Testing", "the smoke gate runs on the gang's nodes")
        d.phase(Phase.SMOKE_TESTING, "smoke gate started")
    else:
        d.phase(Phase.PENDING, f"waiting for gang generation {d.status.gang_generation} to be scheduled")


def _unschedulable(
    d: _Draft, pods: Sequence[ObservedPod], current: Sequence[ObservedPod], settings: PolicySettings
) -> bool:
    """The Unschedulable condition, event and action (see ``policy_schedule``); True when the job failed."""
    stuck = stuck_gang(current, d.now, settings.unschedulable_timeout_seconds)
    if stuck is None:
        d.clear(
            C.UNSCHEDULABLE, "Scheduled", f"the scheduler placed gang generation {d.status.gang_generation}"
        )
        return False
    if not stuck.overdue:
        d.after(stuck.due_in_seconds)
        return False
    message = stuck.describe(settings.unschedulable_timeout_seconds, d.status.excluded_nodes)
    if settings.unschedulable_action == UnschedulableAction.FAIL:
        d.cond(C.UNSCHEDULABLE, True, "Unschedulable", message)
        # Every pod goes, whatever cleanPodPolicy says: a pod left Pending would start once placed.
        _finish(
            d,
            pods,
            Phase.FAILED,
            "Unschedulable",
            f"{message}; failed (unschedulable action Fail)",
            everything=True,
        )
        return True
    wait = f"{message}; waiting (unschedulable action Wait)"
    if not d.status.is_true(C.UNSCHEDULABLE):
        d.event(EventType.WARNING, "Unschedulable", wait)
    d.cond(C.UNSCHEDULABLE, True, "Unschedulable", wait)
    return False


def _queue_state(d: _Draft, current: Sequence[ObservedPod]) -> None:
    """Queued while Kueue holds the gang's pods at its admission gate; not queued once it released them."""
    queues = sorted({p.queue_gated for p in current if p.queue_gated is not None})
    if queues:
        message = (
            f"gang generation {d.status.gang_generation} is queued in Kueue LocalQueue {', '.join(queues)}: "
            "its pods wait at Kueue's admission gate until the queue has quota for the whole gang"
        )
        if not d.status.is_true(C.QUEUED):
            d.event(EventType.NORMAL, "Queued", message)
        d.cond(C.QUEUED, True, "WaitingForAdmission", message)
    elif current and d.status.is_true(C.QUEUED):
        message = f"Kueue admitted gang generation {d.status.gang_generation} as one workload"
        d.cond(C.QUEUED, False, "Admitted", message)
        d.event(EventType.NORMAL, "Admitted", message)


def _retry_refused_gang(d: _Draft, current: Sequence[ObservedPod], settings: PolicySettings) -> bool:
    """A refused gang is rolled back, then tried again whole after the refusal backoff
    (:mod:`.policy_gang`); True when the retry is due now."""
    for pod in current:
        if pod.deleting_since is None:
            d.deletions[pod.name] = PodDeletion(name=pod.name, uid=pod.uid)
    if current:
        return False  # the retry reuses the pods' names: wait until they are gone
    refusal = d.status.condition(C.GANG_REFUSED)
    assert refusal is not None
    ready_at = refusal.last_transition_time.timestamp() + refusal_backoff(d.status.create_refusals, settings)
    wait = ready_at - d.now.timestamp()
    if wait > 0:
        d.after(wait)
        return False
    message = (
        f"creating gang generation {d.status.gang_generation} again after "
        f"{d.status.create_refusals} refusal(s) in a row"
    )
    d.cond(C.GANG_REFUSED, False, "Retrying", message)
    d.event(EventType.NORMAL, "RetryingCreate", message)
    return True


def _fail_gang(
    d: _Draft,
    pods: Sequence[ObservedPod],
    current: Sequence[ObservedPod],
    failures: Sequence[Failure],
    exclude: Sequence[str],
    nodes: Mapping[str, NodeState],
    dead: set[str],
    settings: PolicySettings,
) -> None:
    policy = d.job.run_policy
    for failure in failures:
        d.event(EventType.WARNING, failure.reason, failure.message)
    gate_failure = next((f for f in failures if f.reason.startswith("SmokeTest")), None)
    if gate_failure is not None:
        d.cond(C.SMOKE_TEST_FAILED, True, gate_failure.reason, gate_failure.message)
        d.cond(C.SMOKE_TESTING, False, "Failed", gate_failure.message)
    decision = cap_exclusions(d.status.excluded_nodes, exclude, nodes, needed=d.job.num_nodes)
    if decision.added:
        d.status = d.status.replace(excluded_nodes=(*d.status.excluded_nodes, *decision.added))
        d.event(
            EventType.WARNING,
            "NodeExcluded",
            f"excluded node(s) {', '.join(decision.added)} after a smoke-gate failure",
        )
    if decision.withheld:
        d.event(
            EventType.WARNING,
            "NodeExclusionCapped",
            f"node(s) {', '.join(decision.withheld)} failed the smoke gate but stay schedulable for the job: "
            f"excluding them would leave fewer than the {d.job.num_nodes} schedulable node(s) the gang needs "
            f"({decision.schedulable} left outside status.excludedNodes)",
        )
    permanent = next((f for f in failures if f.permanent), None)
    first = failures[0]
    if permanent is not None:
        _finish(
            d, pods, Phase.FAILED, permanent.reason, f"{permanent.message} (not retried: permanent error)"
        )
        return
    # Kueue stopped the gang (the ranks it already removed show as PodDeleted): not a failure of the job.
    reasons = {f.reason for f in failures}
    preempted = PREEMPTED in reasons and reasons <= {PREEMPTED, "PodDeleted"}
    if not preempted and d.status.restarts >= policy.backoff_limit:
        message = (
            f"runPolicy.backoffLimit ({policy.backoff_limit}) reached after {d.status.restarts} gang restart(s); "
            f"last failure: {first.message}"
        )
        _finish(d, pods, Phase.FAILED, "BackoffLimitExceeded", message)
        return
    restarts = d.status.restarts + (0 if preempted else 1)
    message = (
        f"gang generation {d.status.gang_generation} preempted ({first.message}); recreated and queued again, "
        "not counted against runPolicy.backoffLimit"
        if preempted
        else f"gang restart {restarts}/{policy.backoff_limit} after {first.reason}: {first.message}"
    )
    d.status = d.status.replace(
        restarts=restarts, gang_generation=d.status.gang_generation + 1, message=message, gang_creation=None
    )
    d.cond(C.RESTARTING, True, first.reason, message, new=True)
    d.clear(C.RUNNING, "Restarting", message)
    d.phase(Phase.RESTARTING, message, warning=True)
    for pod in current:
        if pod.deleting_since is None or pod.name in dead:
            d.delete(pod, force=pod.name in dead)
    d.after(restart_backoff(restarts, settings))


def hold(plan: Plan, reason: str, message: str, *, recheck_after: float) -> Plan:
    """The plan without its creations: something outside the job (its runtime) is missing."""
    status = plan.status
    events = plan.events
    if status.message != message:
        status = status.replace(message=message)
        events = (*events, Event(type=EventType.WARNING, reason=reason, message=message))
    requeue = min(plan.requeue_after, recheck_after) if plan.requeue_after is not None else recheck_after
    return Plan(status=status, delete_pods=plan.delete_pods, events=events, requeue_after=requeue)


def invalid(
    job_generation: int,
    stored: JobStatus,
    pods: Sequence[ObservedPod],
    error: Exception,
    now: datetime,
    *,
    reason: str = "InvalidSpec",
    prefix: str = "invalid spec: ",
) -> Plan:
    """A job whose spec cannot be rendered, or whose pods the API server rejects as invalid, fails
    at once: the same manifest would be rejected again, so this is never retried."""
    message = prefix + "; ".join(str(error).splitlines())
    facts = JobFacts(namespace="", name="", generation=job_generation, num_nodes=0, run_policy=RunPolicy())
    d = _Draft(job=facts, now=now, status=stored.replace(observed_generation=job_generation))
    if stored.phase is None:
        d.cond(C.CREATED, True, "Created", "accepted; the spec is checked next")
    # A job that already finished keeps its verdict; an active one fails (once: the same message
    # on the next reconcile changes nothing).
    if d.status.phase is None or not d.status.phase.finished:
        _finish(d, pods, Phase.FAILED, reason, message, everything=True)
    else:
        for deletion in pods_to_clean(pods, CleanPodPolicy.RUNNING):
            d.deletions.setdefault(deletion.name, deletion)
    return d.plan()


def refused(
    job_generation: int,
    status: JobStatus,
    pods: Sequence[ObservedPod],
    created: Mapping[str, str],
    refusal: Refusal,
    now: datetime,
    settings: PolicySettings,
) -> Plan:
    """The API server refused an object of the gang of ``status``: roll the gang back.

    Every pod of the gang's generation is deleted: those in ``pods`` (the cache) and those this
    reconcile created (``created``: name -> uid), each with a uid precondition. A permanent refusal
    (422) fails the job; any other waits for the refusal backoff and tries the whole gang again.
    """
    generation = status.gang_generation
    rollback = {
        p.name: PodDeletion(name=p.name, uid=p.uid)
        for p in pods
        if p.generation == generation and p.deleting_since is None
    }
    for name, uid in created.items():
        rollback.setdefault(name, PodDeletion(name=name, uid=uid))
    if refusal.permanent:
        plan = invalid(
            job_generation,
            status,
            pods,
            ValueError(refusal.message),
            now,
            reason="PodRejected",
            prefix="the API server refused the rendered objects: ",
        )
        deletions = {**{d.name: d for d in plan.delete_pods}, **rollback}
        return dataclasses.replace(plan, delete_pods=tuple(deletions.values()))
    count = status.create_refusals + 1
    wait = refusal_backoff(count, settings)
    reason = refusal.reason
    what = "dry run of" if refusal.dry_run else "creation of"
    message = (
        f"the API server refused the {what} {refusal.kind.lower()} {refusal.name} of gang generation "
        f"{generation} ({reason}): {refusal.message}; fix: {refusal_fix(reason)}. No pod of the gang "
        f"is kept; the whole gang is tried again in {wait:g} s (refusal {count} in a row)"
    )
    facts = JobFacts(namespace="", name="", generation=job_generation, num_nodes=0, run_policy=RunPolicy())
    status = status.replace(create_refusals=count, message=message, gang_creation=None)
    d = _Draft(job=facts, now=now, status=status)
    d.cond(C.GANG_REFUSED, True, reason, message, new=True)
    d.event(EventType.WARNING, "FailedCreate", message)
    d.deletions.update(rollback)
    d.after(wait)
    return d.plan()
