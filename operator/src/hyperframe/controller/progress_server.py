"""The authenticated progress endpoint the training pods post to.

``POST /v1/namespaces/{namespace}/hyperframejobs/{name}/progress`` over HTTPS (the serving
certificate from ``HYPERFRAME_STATUS_TLS_*``; its CA reaches the pods in each job's ConfigMap,
so the bearer token never crosses the network in clear) with a JSON ``ProgressUpdate``
and ``Authorization: Bearer <token>``, where the token is the pod's projected service-account
token with audience ``hyperframe.dev/status``. The operator accepts it only when:

1. a TokenReview authenticates the token for that audience;
2. the token is bound to a pod (``authentication.kubernetes.io/pod-name`` in the review) of the
   URL's namespace;
3. that pod carries the job label (``hyperframe.dev/job-name``) of the URL's job and the job's
   current gang generation (a pod of a previous gang cannot overwrite the new gang's progress).

Then ``status.progress`` is written: the first report at once, later ones coalesced to at most
one write per ``progress_flush_seconds`` per job (so status never lags more than that, and 1000
ranks posting every second cost one write). Reviews are cached briefly by token hash.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import ssl
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from hyperframe.constants import MAX_PROGRESS_METRICS, PROGRESS_METRIC_NAME_MAX, STATUS_TOKEN_AUDIENCE

from .caches import Caches, JobKey
from .config import OperatorConfig
from .kube import KubeApi
from .metrics import Metrics
from .observed import observe_pod
from .status import JobStatus, format_time

__all__ = ["ProgressServer", "parse_progress", "serving_context"]

log = logging.getLogger("hyperframe.controller.progress")

_REVIEW_CACHE_SECONDS = 60.0
_REVIEW_CACHE_MAX = 10_000
_POD_NAME = "authentication.kubernetes.io/pod-name"
_POD_UID = "authentication.kubernetes.io/pod-uid"
_FIELDS: Mapping[str, type] = {
    "frame": int,
    "totalFrames": int,
    "step": int,
    "loss": float,
    "samplesPerSecond": float,
    "etaSeconds": float,
}


def parse_progress(data: object) -> dict[str, Any]:
    """The ``status.progress`` fields of a report; raises ValueError naming a bad field."""
    if not isinstance(data, Mapping):
        raise ValueError("body: expected a JSON object with " + ", ".join(_FIELDS))
    out: dict[str, Any] = {}
    for name, kind in _FIELDS.items():
        value = data.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name}: expected a number, got {value!r:.40}")
        if kind is int:
            if value != int(value) or value < 0:
                raise ValueError(f"{name}: expected a non-negative integer, got {value}")
            out[name] = int(value)
        else:
            if not math.isfinite(value):
                continue  # a NaN loss is reported as absent rather than breaking the status write
            if name != "loss" and value < 0:
                raise ValueError(f"{name}: expected >= 0, got {value}")
            out[name] = float(value)
    metrics = data.get("metrics")
    if metrics is not None:
        out["metrics"] = _parse_metrics(metrics)
    return out


def _parse_metrics(data: object) -> dict[str, float]:
    """``metrics``: the runtime sends at most MAX_PROGRESS_METRICS finite numbers by name (it drops
    the rest); a report past that bound is refused rather than cut here."""
    if not isinstance(data, Mapping):
        raise ValueError("metrics: expected an object of name -> number")
    if len(data) > MAX_PROGRESS_METRICS:
        raise ValueError(f"metrics: {len(data)} names, at most {MAX_PROGRESS_METRICS}")
    out: dict[str, float] = {}
    for name, value in data.items():
        if not isinstance(name, str) or not name or len(name) > PROGRESS_METRIC_NAME_MAX:
            raise ValueError(
                f"metrics: name {name!r:.70}: expected 1 to {PROGRESS_METRIC_NAME_MAX} characters"
            )
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"metrics.{name}: expected a finite number, got {value!r:.40}")
        out[name] = float(value)
    return out


def serving_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """TLS 1.2+ server context with the operator's serving certificate."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


class ProgressServer:
    def __init__(self, *, kube: KubeApi, caches: Caches, config: OperatorConfig, metrics: Metrics) -> None:
        self._kube = kube
        self._caches = caches
        self._flush_seconds = config.progress_flush_seconds
        self._port = config.status_port
        self._tls = (config.status_tls_cert_file, config.status_tls_key_file)
        self._metrics = metrics
        self._reviews: dict[str, tuple[float, dict[str, Any]]] = {}
        self._pending: dict[JobKey, dict[str, Any]] = {}
        self._last_write: dict[JobKey, float] = {}
        self._flushers: dict[JobKey, asyncio.Task[None]] = {}
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024)
        app.router.add_post("/v1/namespaces/{namespace}/hyperframejobs/{name}/progress", self.handle)
        return app

    async def start(self) -> None:
        if not self._port:
            return
        tls = serving_context(*self._tls) if self._tls[0] else None
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, host="0.0.0.0", port=self._port, ssl_context=tls).start()
        log.info("progress endpoint listening on :%d (%s)", self._port, "HTTPS" if tls else "plain HTTP")

    async def stop(self) -> None:
        for task in self._flushers.values():
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()

    def _reject(self, status: int, reason: str, message: str) -> web.Response:
        self._metrics.progress_reports.labels(result=reason).inc()
        return web.json_response({"error": message}, status=status)

    async def _review(self, token: str) -> dict[str, Any]:
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        cached = self._reviews.get(digest)
        if cached is not None and now - cached[0] < _REVIEW_CACHE_SECONDS:
            return cached[1]
        review = await self._kube.review_token(token, STATUS_TOKEN_AUDIENCE)
        if len(self._reviews) >= _REVIEW_CACHE_MAX:
            self._reviews.clear()
        self._reviews[digest] = (now, review)
        return review

    async def handle(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer ") or not header[7:].strip():
            return self._reject(401, "unauthenticated", "missing bearer token")
        review = await self._review(header[7:].strip())
        if not review.get("authenticated") or STATUS_TOKEN_AUDIENCE not in (review.get("audiences") or ()):
            return self._reject(
                401, "unauthenticated", f"token is not valid for audience {STATUS_TOKEN_AUDIENCE}"
            )
        user = review.get("user") or {}
        extra = user.get("extra") or {}
        pod_names, pod_uids = extra.get(_POD_NAME) or [], extra.get(_POD_UID) or []
        username = str(user.get("username", ""))
        if not pod_names or not username.startswith(f"system:serviceaccount:{namespace}:"):
            return self._reject(403, "forbidden", f"token is not bound to a pod in namespace {namespace}")
        reason = await self._authorize(
            namespace, name, str(pod_names[0]), str(pod_uids[0]) if pod_uids else ""
        )
        if reason:
            return self._reject(403, "forbidden", reason)
        try:
            progress = parse_progress(await request.json())
        except ValueError as exc:
            return self._reject(400, "invalid", str(exc))
        progress["updatedAt"] = format_time(datetime.now(UTC))
        self._accept((namespace, name), progress)
        self._metrics.progress_reports.labels(result="accepted").inc()
        return web.json_response({"accepted": True}, status=202)

    async def _authorize(self, namespace: str, name: str, pod_name: str, pod_uid: str) -> str:
        """Empty when the pod may report for the job, else why not."""
        body = self._caches.jobs.get((namespace, name))
        if body is None:
            return f"no HyperFrameJob {namespace}/{name}"
        cached = self._caches.pod(namespace, pod_name, name)
        if cached is not None:
            pod, uid = cached
        else:
            raw = await self._kube.get_pod(namespace, pod_name)
            observed = observe_pod(raw) if raw else None
            if raw is None or observed is None or observed.job != name:
                return f"pod {pod_name} does not belong to HyperFrameJob {name}"
            pod, uid = observed, str((raw.get("metadata") or {}).get("uid", ""))
        if pod_uid and uid and pod_uid != uid:
            return f"token was issued for an earlier pod named {pod_name}"
        generation = JobStatus.from_dict(body.get("status")).gang_generation
        if pod.generation != generation:
            return f"pod {pod_name} is from gang generation {pod.generation}; the job runs generation {generation}"
        return ""

    def _accept(self, key: JobKey, progress: dict[str, Any]) -> None:
        self._pending[key] = progress
        if key in self._flushers:
            return
        wait = self._last_write.get(key, 0.0) + self._flush_seconds - time.monotonic()
        self._flushers[key] = asyncio.create_task(self._flush(key, max(wait, 0.0)))

    async def _flush(self, key: JobKey, wait: float) -> None:
        try:
            if wait > 0:
                await asyncio.sleep(wait)
            progress = self._pending.pop(key, None)
            if progress is None:
                return
            self._last_write[key] = time.monotonic()
            namespace, name = key
            try:
                await self._kube.patch_job_status(
                    namespace, name, {"progress": progress}, resource_version=None
                )
            except Exception as exc:
                log.warning("progress of %s/%s not written: %r", namespace, name, exc)
        finally:
            self._flushers.pop(key, None)
            if key in self._pending:
                self._accept(key, self._pending.pop(key))
