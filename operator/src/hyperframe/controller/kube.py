"""The operator's one Kubernetes API client: rate-limited (QPS/burst), counted, run in a thread pool.

The official client is synchronous; calls run in a bounded thread pool so that many pods are
created in parallel while the event loop stays free. Bodies stay plain JSON both ways (no model
classes), which keeps CPU and memory low at scale.
Create calls tolerate 409 AlreadyExists and deletes tolerate 404: every write is idempotent.
With a :class:`.fence.WriteFence` every write (any method but GET) is fenced: refused once the
leader's term has ended, and given a total timeout that ends with the term.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import urllib3
from kubernetes import client, config

from hyperframe.constants import GROUP, JOB_PLURAL, RUNTIME_PLURAL, VERSION

from .fence import WriteFence
from .metrics import Metrics
from .ratelimit import TokenBucket

__all__ = ["USER_AGENT_PREFIX", "ApiError", "Conflict", "KubeApi", "api_client_for", "load_api_client"]

log = logging.getLogger("hyperframe.controller.kube")

_JSON = "application/json"
# (connect, read) seconds: a request to a struggling API server fails and is retried by the work
# queue instead of holding a thread forever.
_REQUEST_TIMEOUT = (10.0, 60.0)
_FENCED_TIMEOUT_MAX = 60.0
"""The longest total timeout of a fenced write (less when the leader's term ends sooner)."""
_MERGE_PATCH = "application/merge-patch+json"
# managedFields name the writer by the user agent up to its first "/".
USER_AGENT_PREFIX = "hyperframe-operator-"
_JOBS = f"/apis/{GROUP}/{VERSION}/namespaces/{{ns}}/{JOB_PLURAL}"
_LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"


class ApiError(Exception):
    """A non-2xx answer of the API server; ``message`` and ``causes`` come from its Status body."""

    def __init__(self, status: int, reason: str, body: str) -> None:
        self.status = status
        self.message, self.causes = _parse_status(body, fallback=f"HTTP {status} {reason}")
        super().__init__(f"HTTP {status} {reason}: {self.message}")


def _parse_status(body: str, *, fallback: str) -> tuple[str, list[tuple[str, str]]]:
    """(message, [(field, message)]) of a metav1.Status body, each on one line."""
    try:
        status = json.loads(body) if body else {}
    except ValueError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    message = " ".join(str(status.get("message") or body.strip()[:300] or fallback).split())
    causes = [
        (str(c.get("field") or ""), " ".join(str(c.get("message") or "").split()))
        for c in (status.get("details") or {}).get("causes") or ()
        if isinstance(c, dict)
    ]
    return message, causes


class Conflict(ApiError):
    """The object changed since it was read (HTTP 409 on a write with a resourceVersion)."""


def load_api_client(pool_size: int, *, identity: str) -> Any:
    """In-cluster credentials when running in a pod, else the kubeconfig (``KUBECONFIG``)."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return api_client_for(configuration, pool_size, identity=identity)


def api_client_for(configuration: Any, pool_size: int, *, identity: str) -> Any:
    """The operator's API client for a loaded configuration.

    The user agent names the replica, so the API server's managedFields (and audit log) say which
    replica wrote an object.
    """
    configuration.connection_pool_maxsize = pool_size
    # No resending inside urllib3 (it would resend a PUT or DELETE after a read timeout, and restart
    # a fenced write's timeout): a failed request fails, and the work queue or the elector retries it.
    configuration.retries = False
    api_client = client.ApiClient(configuration)
    api_client.user_agent = f"{USER_AGENT_PREFIX}{identity}/operator"
    return api_client


class KubeApi:
    """Async facade over the client's HTTP layer; every verb used here is listed in :mod:`.rbac`.

    Requests go through the official client's configuration, auth and connection pool, but bodies are
    plain JSON dicts both ways: no model (de)serialization, which keeps CPU and memory low at scale.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        qps: float,
        burst: int,
        workers: int,
        metrics: Metrics,
        fence: WriteFence | None = None,
    ) -> None:
        self._api_client = api_client
        self._fence = fence
        self._bucket = TokenBucket(qps=qps, burst=burst)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kube")
        self._metrics = metrics

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _timeout(self, method: str, timeout: float | None) -> float | tuple[float, float]:
        """The client timeout of a request about to be sent (a float is urllib3's total timeout)."""
        if self._fence is not None and method != "GET":
            return self._fence.budget(timeout if timeout is not None else _FENCED_TIMEOUT_MAX)
        return timeout if timeout is not None else _REQUEST_TIMEOUT

    def _send(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None,
        body: Any,
        content_type: str,
        timeout: float | None,
    ) -> dict[str, Any]:
        # In the sending thread, after every wait (token bucket, a free thread): the fence is asked
        # at the last moment before the request leaves.
        request_timeout = self._timeout(method, timeout)
        headers = {"Accept": _JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self._api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self._api_client.call_api(*request, _request_timeout=request_timeout)
            data = response.read() or b""
        except urllib3.exceptions.HTTPError as exc:  # timeouts, refused or dropped connections
            raise ConnectionError(f"{method} {path}: {exc}") from exc
        if not 200 <= response.status <= 299:
            kind = Conflict if response.status == 409 else ApiError
            raise kind(int(response.status), str(response.reason), data.decode(errors="replace"))
        decoded = json.loads(data) if data else {}
        return decoded if isinstance(decoded, dict) else {}

    async def _request(
        self,
        verb: str,
        resource: str,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = _JSON,
        tolerate: tuple[int, ...] = (),
        timeout: float | None = None,
    ) -> dict[str, Any] | None:
        """One API request; None when the answer is one of the ``tolerate`` statuses.

        ``timeout`` is a total one, in seconds (default: 10 s to connect, 60 s per read).
        """
        await self._bucket.acquire()
        self._metrics.api_requests.labels(verb=verb, resource=resource).inc()
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                self._pool, self._send, method, path, query, body, content_type, timeout
            )
        except ApiError as exc:
            if exc.status in tolerate:
                return None
            raise

    # -- HyperFrameJob / HyperFrameRuntime ------------------------------------------------

    async def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = f"{_JOBS.format(ns=namespace)}/{name}"
        return await self._request("get", JOB_PLURAL, "GET", path, tolerate=(404,))

    async def patch_job_status(
        self, namespace: str, name: str, status: Mapping[str, Any], *, resource_version: str | None
    ) -> dict[str, Any]:
        """Merge-patch ``status``; with ``resource_version`` the write fails with :class:`Conflict` if stale."""
        body: dict[str, Any] = {"status": dict(status)}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        path = f"{_JOBS.format(ns=namespace)}/{name}/status"
        result = await self._request(
            "patch",
            f"{JOB_PLURAL}/status",
            "PATCH",
            path,
            body=body,
            content_type=_MERGE_PATCH,
            tolerate=(404,),
        )
        return result or {}

    async def delete_job(self, namespace: str, name: str, *, uid: str | None) -> None:
        body: dict[str, Any] = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Background",
        }
        if uid:
            body["preconditions"] = {"uid": uid}
        path = f"{_JOBS.format(ns=namespace)}/{name}"
        await self._request("delete", JOB_PLURAL, "DELETE", path, body=body, tolerate=(404, 409))

    async def served_job_resources(self) -> set[str]:
        """The resources the API server's discovery lists for HyperFrame's group and version (empty
        while it does not serve them, e.g. an API server still starting up)."""
        path = f"/apis/{GROUP}/{VERSION}"
        listing = await self._request("get", "discovery", "GET", path, tolerate=(404, 503)) or {}
        return {str(r.get("name")) for r in listing.get("resources") or () if isinstance(r, dict)}

    async def get_runtime(self, name: str) -> dict[str, Any] | None:
        path = f"/apis/{GROUP}/{VERSION}/{RUNTIME_PLURAL}/{name}"
        return await self._request("get", RUNTIME_PLURAL, "GET", path, tolerate=(404,))

    # -- the leader-election Lease ------------------------------------------------------------

    async def get_lease(self, namespace: str, name: str, *, timeout: float) -> dict[str, Any] | None:
        path = f"{_LEASES.format(ns=namespace)}/{name}"
        return await self._request("get", "leases", "GET", path, tolerate=(404,), timeout=timeout)

    async def create_lease(
        self, namespace: str, body: Mapping[str, Any], *, timeout: float
    ) -> dict[str, Any]:
        path = _LEASES.format(ns=namespace)
        return await self._request("create", "leases", "POST", path, body=dict(body), timeout=timeout) or {}

    async def replace_lease(
        self, namespace: str, name: str, body: Mapping[str, Any], *, timeout: float
    ) -> dict[str, Any]:
        """PUT with the body's resourceVersion: fails with :class:`Conflict` if another replica wrote first."""
        path = f"{_LEASES.format(ns=namespace)}/{name}"
        return await self._request("update", "leases", "PUT", path, body=dict(body), timeout=timeout) or {}

    # -- objects of a job -------------------------------------------------------------------

    async def create(
        self, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any] | None:
        """Create a rendered object if absent: the object as the server stored it (with its uid), or
        None when it already existed.

        ``dry_run`` asks the API server to validate and admit it without storing anything.
        """
        kind = str(body.get("kind"))
        api_version = str(body.get("apiVersion"))
        resource = {"Pod": "pods", "Service": "services", "ConfigMap": "configmaps"}.get(
            kind, kind.lower() + "s"
        )
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        path = f"{prefix}/namespaces/{namespace}/{resource}"
        return await self._request(
            "create",
            resource,
            "POST",
            path,
            query=[("dryRun", "All")] if dry_run else None,
            body=dict(body),
            tolerate=(409,),
        )

    async def delete_pod(self, namespace: str, name: str, *, uid: str, force: bool) -> bool:
        """Delete the pod ``name`` only if it is still the one with ``uid``.

        False when that pod no longer exists: gone (404), or the name now belongs to a newer pod
        (409: the uid precondition failed), which is left alone.
        """
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}
        if force:
            body["gracePeriodSeconds"] = 0
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        return (
            await self._request("delete", "pods", "DELETE", path, body=body, tolerate=(404, 409)) is not None
        )

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._request(
            "get", "pods", "GET", f"/api/v1/namespaces/{namespace}/pods/{name}", tolerate=(404,)
        )

    async def label_pod(self, namespace: str, name: str, labels: Mapping[str, str | None]) -> None:
        """Merge-patch the pod's labels (None removes one); a missing pod is not an error."""
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        body = {"metadata": {"labels": dict(labels)}}
        await self._request(
            "patch", "pods", "PATCH", path, body=body, content_type=_MERGE_PATCH, tolerate=(404,)
        )

    async def create_event(self, namespace: str, body: Mapping[str, Any]) -> None:
        path = f"/api/v1/namespaces/{namespace}/events"
        await self._request("create", "events", "POST", path, body=dict(body), tolerate=(409,))

    async def review_token(self, token: str, audience: str) -> dict[str, Any]:
        """The TokenReview ``status`` for a bearer token and the audience it must carry."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [audience]},
        }
        path = "/apis/authentication.k8s.io/v1/tokenreviews"
        result = await self._request("create", "tokenreviews", "POST", path, body=body) or {}
        status = result.get("status")
        return status if isinstance(status, dict) else {}

    async def list_all(self, resource: str, path: str, *, label_selector: str = "") -> list[dict[str, Any]]:
        """Every object of a collection, 500 at a time."""
        items, _ = await self.list_snapshot(resource, path, label_selector=label_selector)
        return items

    async def list_snapshot(
        self, resource: str, path: str, *, label_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        """Every object of a collection and the resourceVersion of the list (one consistent snapshot:
        the continue token of each page keeps the first page's resourceVersion)."""
        items: list[dict[str, Any]] = []
        token = ""
        version = ""
        while True:
            query = [("limit", "500")]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if token:
                query.append(("continue", token))
            page = await self._request("list", resource, "GET", path, query=query) or {}
            items.extend(i for i in page.get("items") or () if isinstance(i, dict))
            meta = page.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            token = str(meta.get("continue") or "")
            if not token:
                return items, version
