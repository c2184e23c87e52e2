"""The operator's parts, built once per process and wired together (no globals, no per-handler clients)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import uuid
from collections.abc import Mapping
from typing import Any

from hyperframe.constants import GROUP, JOB_PLURAL, LABEL_MANAGED_BY, MANAGED_BY, RUNTIME_PLURAL, VERSION

from .caches import Caches, JobKey
from .config import OperatorConfig
from .fence import WriteFence
from .kube import ApiError, KubeApi, load_api_client
from .leader import LeaderElector, own_namespace
from .leader_label import LeaderLabel
from .metrics import Metrics
from .progress_server import ProgressServer
from .reconciler import Reconciler
from .workqueue import WorkQueue

__all__ = ["Controller"]

_DISCOVERY_RETRY_SECONDS = 1.0
_LABEL_DROP_SECONDS = 5.0
"""Bound on removing the leader label when leadership ends (the API may be what failed)."""

log = logging.getLogger("hyperframe.controller")


class Controller:
    """Caches fed by kopf's watches, a work queue of job keys, and the reconciler that drains it.

    Every replica keeps its caches current from the watches (reads only). Only the replica holding
    the Lease (:mod:`.leader`) runs the work queue, its timers, the pod resync and the progress
    endpoint, and carries the leader label on its pod (:mod:`.leader_label`); a standby makes no
    API write until it takes the Lease over (at start it removes a leader label left on its own
    pod, if any), and every write of the leader passes its :class:`~.fence.WriteFence`.
    """

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        self.identity = f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"
        self.metrics = Metrics()
        self.caches = Caches()
        self.kube: KubeApi | None = None
        self.queue: WorkQueue[JobKey] | None = None
        self.progress: ProgressServer | None = None
        self._elector: LeaderElector | None = None
        self._lease_api: KubeApi | None = None
        self._election: asyncio.Task[None] | None = None
        self._resync: asyncio.Task[None] | None = None
        self.fence = WriteFence()
        self._label: LeaderLabel | None = None

    async def start(self) -> None:
        """Called from kopf's startup handler, inside the operator's event loop."""
        config = self.config
        api_client = load_api_client(config.workers + 2, identity=self.identity)
        self.kube = KubeApi(
            api_client,
            qps=config.api_qps,
            burst=config.api_burst,
            workers=config.workers,
            metrics=self.metrics,
            fence=self.fence if config.lease_name else None,
        )
        self.metrics.queue_depth.set_function(lambda: float(len(self.queue or ())))
        log.info("operator started as %s: %s", self.identity, config)
        await self._wait_served(self.kube)
        if not config.lease_name:
            await self._activate()  # no election: this is the only replica
            return
        # The Lease has its own threads and token bucket (client-go gives leader election its own
        # client too): renewals never queue behind the requests of a big gang.
        self._lease_api = KubeApi(api_client, qps=5, burst=5, workers=2, metrics=self.metrics)
        if config.pod_name:
            # The label goes through the Lease's client, which the write fence does not gate: a
            # standby must clear a stale label before it leads, and a leader whose term ended must
            # still remove its own (it touches only this replica's pod, never a job's objects).
            self._label = LeaderLabel(
                self._lease_api, namespace=config.pod_namespace or own_namespace(), pod=config.pod_name
            )
            await self._label.show(leading=False)  # a label left by a leader that crashed in this pod
        self._elector = LeaderElector(
            self._lease_api,
            namespace=config.lease_namespace or own_namespace(),
            name=config.lease_name,
            identity=self.identity,
            lease_seconds=config.lease_duration_seconds,
            renew_deadline_seconds=config.lease_renew_deadline_seconds,
            retry_seconds=config.lease_retry_seconds,
            fence=self.fence,
        )
        self._election = asyncio.create_task(self._lead(self._elector), name="leader-election")

    async def _wait_served(self, kube: KubeApi) -> None:
        """Return once the API server's discovery serves HyperFrameJobs and HyperFrameRuntimes.

        kopf resolves the watched resources once, after the startup handlers, and later only when a
        CRD changes: a replica started while the API server is (re)starting would otherwise never
        watch the jobs, and as the leader it would reconcile none of them.
        """
        while True:
            try:
                served = await kube.served_job_resources()
            except (ApiError, OSError) as exc:
                served, why = set(), repr(exc)
            else:
                why = f"served: {sorted(served) or 'none'}"
            if {JOB_PLURAL, RUNTIME_PLURAL} <= served:
                return
            log.warning("waiting for the API server to serve %s/%s (%s)", GROUP, VERSION, why)
            await asyncio.sleep(_DISCOVERY_RETRY_SECONDS)

    async def _lead(self, elector: LeaderElector) -> None:
        try:
            await elector.run(self._activate)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the active replica failed to start its work")
        # Leadership lost (or never usable): stop acting at once, then end the process; its
        # Deployment restarts it as a standby with fresh caches.
        await self._deactivate()
        os.kill(os.getpid(), signal.SIGTERM)

    async def _activate(self) -> None:
        """Become the active replica: progress endpoint, fresh caches, work queue, every job queued."""
        assert self.kube is not None
        config = self.config
        self.progress = ProgressServer(
            kube=self.kube, caches=self.caches, config=config, metrics=self.metrics
        )
        await self.progress.start()  # binds first: a taken port fails the start before any work
        await self._prime(self.kube)
        reconciler = Reconciler(kube=self.kube, caches=self.caches, config=config, metrics=self.metrics)
        self.queue = WorkQueue(reconciler, concurrency=config.workers, on_error=self._on_error)
        self.queue.start()
        self.metrics.watch_pod_phases(self.caches.pod_count)
        self.metrics.leader.set(1)
        self._resync = asyncio.create_task(self._resync_pods(self.kube), name="pod-resync")
        if self._label is not None:
            await self._label.show(leading=True)  # the Service now routes progress posts here
        # A standby saw kopf's initial listing long ago: every job it knows is looked at once now.
        for key in list(self.caches.jobs):
            self.queue.add(key)
        log.info("active: reconciling %d jobs", len(self.caches.jobs))

    async def _deactivate(self) -> None:
        leading = self.queue is not None
        self.metrics.leader.set(0)
        if leading and self._label is not None:
            try:
                async with asyncio.timeout(_LABEL_DROP_SECONDS):  # not wait_for: see leader.py
                    await self._label.drop()
            except TimeoutError:
                log.warning("leader label not removed within %.0f s", _LABEL_DROP_SECONDS)
        resync, self._resync = self._resync, None
        if resync is not None:
            resync.cancel()
            await asyncio.gather(resync, return_exceptions=True)
        queue, self.queue = self.queue, None
        if queue is not None:
            await queue.stop()
        progress, self.progress = self.progress, None
        if progress is not None:
            await progress.stop()

    async def _prime(self, kube: KubeApi) -> None:
        """Fill the pod and node caches before the first reconcile, so a restarted operator never
        mistakes "not listed yet" for "missing" (kopf's watches then keep the caches current)."""
        await self._list_pods(kube)
        for node in await kube.list_all("nodes", "/api/v1/nodes"):
            self.caches.node_event(None, node)

    async def _list_pods(self, kube: KubeApi) -> set[JobKey]:
        """One full listing of the managed pods into the cache; the jobs whose pods changed."""
        selector = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
        scopes = [(ns, f"/api/v1/namespaces/{ns}/pods") for ns in self.config.namespaces] or [
            ("", "/api/v1/pods")
        ]
        changed: set[JobKey] = set()
        for namespace, path in scopes:
            items, version = await kube.list_snapshot("pods", path, label_selector=selector)
            changed |= self.caches.resync_pods(items, version, namespace=namespace)
        return changed

    async def _resync_pods(self, kube: KubeApi) -> None:
        """Every ``pod_resync_seconds``: list the pods again, so none the watches missed lingers."""
        while True:
            await asyncio.sleep(self.config.pod_resync_seconds)
            try:
                changed = await self._list_pods(kube)
            except Exception as exc:  # the next period tries again
                log.warning("pod resync failed: %r", exc)
                continue
            for key in changed:
                if key in self.caches.jobs:
                    self._enqueue(key)

    async def stop(self) -> None:
        if self._election is not None and self._election is not asyncio.current_task():
            self._election.cancel()
            await asyncio.gather(self._election, return_exceptions=True)
        leading = self.queue is not None
        await self._deactivate()
        if leading and self._elector is not None:
            await self._elector.release()  # the standby takes over at once, not after the lease expires
        for api in (self.kube, self._lease_api):
            if api is not None:
                api.close()

    def _on_error(self, key: JobKey, exc: BaseException) -> None:
        self.metrics.reconcile_errors.inc()

    def _enqueue(self, key: JobKey) -> None:
        if self.queue is not None:
            self.queue.add(key)

    # -- watch events (from the kopf wiring) --------------------------------------------------

    def job_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        key: JobKey = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if event_type == "DELETED":
            self.caches.drop_job(key)
            if self.queue is not None:
                self.queue.forget(key)
            return
        self.caches.put_job(body)
        self._enqueue(key)

    def pod_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        key = self.caches.pod_event(event_type, body)
        if key is not None and key in self.caches.jobs:
            self._enqueue(key)

    def node_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        for key in self.caches.node_event(event_type, body):
            self._enqueue(key)
