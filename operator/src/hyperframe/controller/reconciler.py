"""One reconcile of one job: read the caches, run the state machine, apply its plan.

Order of effects (see :mod:`.plan`): the status is written once, with the resourceVersion it was
computed from; then pods are deleted and objects created, all in parallel; then events are posted.
A stale read makes the status write fail with a conflict, and the job is simply reconciled again.
A plan that acts (deletes, creates) always makes that resourceVersion-checked write first, an
empty one when the status does not change, so nothing is done on a view of the job that is no
longer current. Pod deletions name the pod's uid; one that finds its pod gone drops it from the
cache, so a pod that no longer exists cannot hold the gang back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hyperframe.api.errors import SpecError
from hyperframe.api.models import HyperFrameJob, parse_job
from hyperframe.constants import LABEL_RANK
from hyperframe.render import RenderContext, render_job
from hyperframe.render.field_map import job_field_of_pod_field

from .caches import Caches, JobKey
from .config import OperatorConfig
from .events import event_body
from .facts import CleanPodPolicy, JobFacts, PolicySettings, RunPolicy, UnschedulableAction
from .gang import Describe, GangOutcome, create_gang, dry_run_gang
from .kube import ApiError, Conflict, KubeApi
from .metrics import Metrics
from .plan import Plan, PodDeletion
from .policy_gang import Refusal
from .rejection import rejection_message
from .state_machine import hold, invalid, reconcile, refused
from .status import ConditionType, JobStatus, Phase

__all__ = ["Reconciler", "facts_of", "progress_url"]

log = logging.getLogger("hyperframe.controller.reconciler")

_RUNTIME_CACHE_SECONDS = 10.0
_HOLD_RECHECK_SECONDS = 15.0
_ADMITTED_MAX = 10_000


def facts_of(job: HyperFrameJob, body: Mapping[str, Any]) -> JobFacts:
    policy = job.spec.run_policy
    meta = body.get("metadata") or {}
    return JobFacts(
        namespace=str(meta.get("namespace", "")),
        name=job.metadata.name,
        generation=int(meta.get("generation", 0) or 0),
        num_nodes=job.spec.nodes,
        run_policy=RunPolicy(
            backoff_limit=policy.backoff_limit,
            active_deadline_seconds=policy.active_deadline_seconds,
            ttl_seconds_after_finished=policy.ttl_seconds_after_finished,
            clean_pod_policy=CleanPodPolicy(policy.clean_pod_policy),
            suspend=policy.suspend,
        ),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def progress_url(base: str, namespace: str, name: str) -> str:
    """The URL a job's pods post progress to (routed by :mod:`.progress_server`)."""
    return f"{base.rstrip('/')}/v1/namespaces/{namespace}/hyperframejobs/{name}/progress"


def _gang_key(body: Mapping[str, Any], plan: Plan) -> tuple[str, int, int]:
    """(job uid, spec generation, gang generation): one gang of one spec of one job."""
    meta = body.get("metadata") or {}
    return (str(meta.get("uid", "")), int(meta.get("generation", 0) or 0), plan.status.gang_generation)


def _raw_message(error: ApiError, kind: str) -> str:
    return rejection_message(error, kind, lambda _field: None)


def _mapped_message(
    body: Mapping[str, Any], runtime: Mapping[str, Any], ctx: RenderContext, error: ApiError, kind: str
) -> str:
    return rejection_message(error, kind, lambda field: job_field_of_pod_field(body, runtime, field, ctx))


class Reconciler:
    def __init__(self, *, kube: KubeApi, caches: Caches, config: OperatorConfig, metrics: Metrics) -> None:
        self._kube = kube
        self._caches = caches
        self._config = config
        self._metrics = metrics
        self._settings = PolicySettings(
            restart_backoff_seconds=config.restart_backoff_seconds,
            restart_backoff_max_seconds=config.restart_backoff_max_seconds,
            node_not_ready_grace_seconds=config.node_not_ready_grace_seconds,
            terminating_grace_seconds=config.terminating_grace_seconds,
            unschedulable_timeout_seconds=config.unschedulable_timeout_seconds,
            unschedulable_action=UnschedulableAction(config.unschedulable_action),
        )
        self._runtimes: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._render_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="render")
        # (job uid, spec generation, gang generation) whose dry run passed: an optimisation only.
        self._admitted: set[tuple[str, int, int]] = set()
        self._status_ca = (
            Path(config.status_tls_ca_file).read_text(encoding="utf-8") if config.status_tls_ca_file else None
        )

    async def __call__(self, key: JobKey) -> float | None:
        started = time.perf_counter()
        try:
            return await self._reconcile(key)
        finally:
            self._metrics.reconcile_duration.observe(time.perf_counter() - started)

    async def _runtime(self, name: str) -> dict[str, Any] | None:
        now = time.monotonic()
        cached = self._runtimes.get(name)
        if cached is not None and now - cached[0] < _RUNTIME_CACHE_SECONDS:
            return cached[1]
        runtime = await self._kube.get_runtime(name)
        self._runtimes[name] = (now, runtime)
        return runtime

    async def _reconcile(self, key: JobKey) -> float | None:
        body = self._caches.jobs.get(key)
        if body is None:
            return None
        now = datetime.now(UTC)
        stored = JobStatus.from_dict(body.get("status"))
        meta = body.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return None
        try:
            job = parse_job(body)
        except SpecError as exc:
            generation = int(meta.get("generation", 0) or 0)
            plan = invalid(generation, stored, self._caches.pods_of(key), exc, now)
            return await self._apply(key, body, stored, plan)
        facts = facts_of(job, body)
        plan = reconcile(
            facts,
            stored,
            self._caches.pods_of(key),
            self._caches.nodes,
            now,
            self._settings,
            departed=self._caches.departed_of(key),
        )
        objects: list[dict[str, Any]] = []
        describe: Describe = _raw_message
        if plan.create_ranks:
            runtime_name = job.spec.runtime_ref.name
            runtime = await self._runtime(runtime_name)
            if runtime is None:
                message = (
                    f"spec.runtimeRef.name: HyperFrameRuntime {runtime_name!r} not found: "
                    "create it (the Helm chart installs the default runtimes) or fix the name"
                )
                plan = hold(plan, "RuntimeNotFound", message, recheck_after=_HOLD_RECHECK_SECONDS)
            else:
                try:
                    # Rendering is CPU-bound (templates + YAML): off the event loop, so watches and
                    # API replies keep flowing while a big gang renders.
                    loop = asyncio.get_running_loop()
                    ctx = self._context(body, plan)
                    objects = await loop.run_in_executor(
                        self._render_pool, self._render, body, runtime, ctx, plan
                    )
                    describe = functools.partial(_mapped_message, body, runtime, ctx)
                except SpecError as exc:
                    plan = invalid(facts.generation, stored, self._caches.pods_of(key), exc, now)
        # Every object of the gang, each pod included, is validated and admitted by the API server
        # before anything is created, so a refused dry run leaves no Service, ConfigMap or pod
        # behind. Once per gang generation and spec: a reconcile that re-creates pods the cache has
        # not seen yet needs none (a refusal forgets the gang, so its retry is dry-run again).
        gang = _gang_key(body, plan)
        if objects and gang not in self._admitted:
            refusal = await dry_run_gang(self._kube, key[0], objects, describe)
            if refusal is not None:
                plan = self._refused(key, body, plan, refusal, {})
                objects = []
            else:
                if len(self._admitted) >= _ADMITTED_MAX:
                    self._admitted.clear()
                self._admitted.add(gang)
        return await self._apply(key, body, stored, plan, objects, describe)

    def _context(self, body: Mapping[str, Any], plan: Plan) -> RenderContext:
        meta = body.get("metadata") or {}
        status_url = None
        if self._config.status_endpoint_url and self._config.status_port:
            status_url = progress_url(
                self._config.status_endpoint_url, str(meta["namespace"]), str(meta["name"])
            )
        return RenderContext(
            gang_generation=plan.status.gang_generation,
            excluded_nodes=plan.status.excluded_nodes,
            status_url=status_url,
            status_ca=self._status_ca,
        )

    def _refused(
        self, key: JobKey, body: Mapping[str, Any], plan: Plan, refusal: Refusal, created: Mapping[str, str]
    ) -> Plan:
        """The plan that rolls the refused gang of ``plan`` back (see :mod:`.policy_gang`)."""
        self._admitted.discard(_gang_key(body, plan))
        generation = int((body.get("metadata") or {}).get("generation", 0) or 0)
        pods = self._caches.pods_of(key)
        rollback = refused(generation, plan.status, pods, created, refusal, datetime.now(UTC), self._settings)
        # What the refused plan decided besides the creates still happens: its events (its status
        # is the rollback's starting point), its deletions and its earliest requeue.
        deletions = {d.name: d for d in plan.delete_pods} | {d.name: d for d in rollback.delete_pods}
        requeues = [r for r in (plan.requeue_after, rollback.requeue_after) if r is not None]
        return dataclasses.replace(
            rollback,
            events=(*plan.events, *rollback.events),
            delete_pods=tuple(deletions.values()),
            requeue_after=min(requeues) if requeues else None,
        )

    def _render(
        self, body: Mapping[str, Any], runtime: Mapping[str, Any], ctx: RenderContext, plan: Plan
    ) -> list[dict[str, Any]]:
        wanted = {str(rank) for rank in plan.create_ranks}
        return [
            obj
            for obj in render_job(body, runtime, ctx)
            if obj.get("kind") != "Pod" or (obj["metadata"].get("labels") or {}).get(LABEL_RANK) in wanted
        ]

    async def _apply(
        self,
        key: JobKey,
        body: Mapping[str, Any],
        stored: JobStatus,
        plan: Plan,
        objects: list[dict[str, Any]] | None = None,
        describe: Describe | None = None,
    ) -> float | None:
        namespace, name = key
        meta = body.get("metadata") or {}
        patch = plan.status.to_patch(body.get("status"))
        acts = bool(plan.delete_pods or objects or plan.delete_job)
        if patch or acts:
            try:
                fresh = await self._kube.patch_job_status(
                    namespace, name, patch, resource_version=str(meta.get("resourceVersion", "")) or None
                )
            except Conflict:
                latest = await self._kube.get_job(namespace, name)
                if latest is None:
                    self._caches.drop_job(key)
                    return None
                self._caches.put_job(latest)
                return 0.0
            if fresh:
                self._caches.put_job(fresh)
            if patch:
                self._count(stored, plan)
        # A pod created again (a rank completed, a refused gang retried) is judged by itself, not by
        # the copy of it that went.
        self._caches.forget_departed(
            key, [str(o["metadata"]["name"]) for o in objects or () if o.get("kind") == "Pod"]
        )
        actions = [self._delete_pod(namespace, d) for d in plan.delete_pods]
        outcome, *results = await asyncio.gather(
            create_gang(self._kube, namespace, objects or (), describe or _raw_message),
            *actions,
            return_exceptions=True,
        )
        if isinstance(outcome, GangOutcome):
            # The pods just created enter the cache from the create's answers (resourceVersion-
            # checked like any event): a reconcile that runs before the watch reports them must not
            # read a rank whose pod exists as missing, "disappeared after the gang started".
            for created in outcome.stored:
                self._caches.pod_event("ADDED", created)
        if isinstance(outcome, GangOutcome) and outcome.refusal is not None:
            # A create the dry run admitted was refused (quota taken in between, an admission
            # policy changed): the pods created so far are rolled back.
            rollback = self._refused(key, body, plan, outcome.refusal, outcome.created)
            fresh_body = self._caches.jobs.get(key, body)
            return await self._apply(key, fresh_body, plan.status, rollback)
        errors = [r for r in (outcome, *results) if isinstance(r, BaseException)]
        if errors:
            raise errors[0]
        if plan.delete_job:
            await self._kube.delete_job(namespace, name, uid=meta.get("uid"))
            self._caches.drop_job(key)
        if plan.events:
            await asyncio.gather(
                *(self._kube.create_event(namespace, event_body(body, e)) for e in plan.events),
                return_exceptions=True,
            )
        for event in plan.events:
            log.info("%s/%s %s: %s", namespace, name, event.reason, event.message)
        if any(r is False for r in results):
            return 0.0  # a pod turned out to be gone already: decide again on the corrected cache
        return plan.requeue_after

    async def _delete_pod(self, namespace: str, deletion: PodDeletion) -> bool:
        """Delete one pod of the plan; False (and dropped from the cache) when it was gone already."""
        deleted = await self._kube.delete_pod(
            namespace, deletion.name, uid=deletion.uid, force=deletion.force
        )
        if not deleted:
            self._caches.forget_pod(namespace, deletion.name, deletion.uid)
        return deleted

    def _count(self, stored: JobStatus, plan: Plan) -> None:
        new = plan.status
        if stored.phase is None:
            self._metrics.jobs_created.inc()
        if new.phase != stored.phase:
            if new.phase == Phase.SUCCEEDED:
                self._metrics.jobs_succeeded.inc()
            elif new.phase == Phase.FAILED:
                reason = next((c.reason for c in new.conditions if c.type == "Failed"), "Unknown")
                self._metrics.jobs_failed.labels(reason=reason).inc()
        if new.restarts > stored.restarts:
            reason = next((c.reason for c in new.conditions if c.type == "Restarting"), "Unknown")
            self._metrics.jobs_restarted.labels(reason=reason).inc()
        if new.create_refusals > stored.create_refusals:
            refusal = new.condition(ConditionType.GANG_REFUSED)
            self._metrics.gangs_refused.labels(reason=refusal.reason if refusal else "Unknown").inc()
        for check in plan.gate_failures:
            self._metrics.gate_failures.labels(check=check).inc()
