"""The operator's parts, built once per process and wired together (no globals, no per-handler clients)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from hyperframe.constants import LABEL_MANAGED_BY, MANAGED_BY

from .caches import Caches, JobKey
from .config import OperatorConfig
from .kube import KubeApi, load_api_client
from .metrics import Metrics
from .progress_server import ProgressServer
from .reconciler import Reconciler
from .workqueue import WorkQueue

__all__ = ["Controller"]

log = logging.getLogger("hyperframe.controller")


class Controller:
    """Caches fed by kopf's watches, a work queue of job keys, and the reconciler that drains it."""

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        self.metrics = Metrics()
        self.caches = Caches()
        self.kube: KubeApi | None = None
        self.queue: WorkQueue[JobKey] | None = None
        self.progress: ProgressServer | None = None

    async def start(self) -> None:
        """Called from kopf's startup handler, inside the operator's event loop."""
        config = self.config
        self.kube = KubeApi(
            load_api_client(config.workers),
            qps=config.api_qps,
            burst=config.api_burst,
            workers=config.workers,
            metrics=self.metrics,
        )
        self.progress = ProgressServer(
            kube=self.kube, caches=self.caches, config=config, metrics=self.metrics
        )
        await self.progress.start()  # binds first: a taken port fails the start before any work
        await self._prime(self.kube)
        reconciler = Reconciler(kube=self.kube, caches=self.caches, config=config, metrics=self.metrics)
        self.queue = WorkQueue(reconciler, concurrency=config.workers, on_error=self._on_error)
        self.queue.start()
        self.metrics.watch_pod_phases(self.caches.pod_count)
        self.metrics.queue_depth.set_function(lambda: float(len(self.queue or ())))
        log.info("operator started: %s", config)

    async def _prime(self, kube: KubeApi) -> None:
        """Fill the pod and node caches before the first reconcile, so a restarted operator never
        mistakes "not listed yet" for "missing" (kopf's watches then keep the caches current)."""
        selector = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
        paths = [f"/api/v1/namespaces/{ns}/pods" for ns in self.config.namespaces] or ["/api/v1/pods"]
        for path in paths:
            for pod in await kube.list_all("pods", path, label_selector=selector):
                pod.setdefault("metadata", {})
                self.caches.pod_event(None, pod)
        for node in await kube.list_all("nodes", "/api/v1/nodes"):
            self.caches.node_event(None, node)

    async def stop(self) -> None:
        if self.progress is not None:
            await self.progress.stop()
        if self.queue is not None:
            await self.queue.stop()
        if self.kube is not None:
            self.kube.close()

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
