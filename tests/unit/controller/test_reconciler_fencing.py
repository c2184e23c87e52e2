"""The reconciler's delete path: a delete is sent only after the resourceVersion-checked status write
that decided it succeeded, it names the pod's uid, and a pod found gone cannot wedge the gang.

The operator's real Reconciler, caches and API client; the HTTP layer under the client is a stand-in
that answers each request by method and path, and records what was sent.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from hyperframe.api.models import parse_job
from hyperframe.constants import LABEL_GENERATION, LABEL_JOB, LABEL_RANK
from hyperframe.controller.caches import Caches
from hyperframe.controller.config import OperatorConfig
from hyperframe.controller.facts import PolicySettings
from hyperframe.controller.kube import KubeApi
from hyperframe.controller.metrics import Metrics
from hyperframe.controller.observed import observe_pod
from hyperframe.controller.reconciler import Reconciler, facts_of
from hyperframe.controller.state_machine import reconcile
from hyperframe.controller.status import JobStatus, Phase

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "cpu-tiny.yaml"
KEY = ("ns", "cpu-tiny")
Answer = tuple[int, dict[str, Any]]


class _Response:
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.reason = "answer"
        self._data = json.dumps(body).encode()

    def read(self) -> bytes:
        return self._data


class StandInHttp:
    """Answers with ``route(method, path, body)``; records (method, path, query, body)."""

    def __init__(self, route: Callable[[str, str, Any], Answer]) -> None:
        self.route = route
        self.sent: list[tuple[str, str, list[tuple[str, str]], Any]] = []

    def param_serialize(
        self, *, method: str, resource_path: str, query_params: list[tuple[str, str]], body: Any, **_: Any
    ) -> tuple[str, str, list[tuple[str, str]], Any]:
        return method, resource_path, query_params, copy.deepcopy(body)

    def call_api(
        self, method: str, path: str, query: list[tuple[str, str]], body: Any, **_: Any
    ) -> _Response:
        self.sent.append((method, path, query, body))
        return _Response(*self.route(method, path, body))

    def requests(self, method: str, fragment: str = "") -> list[tuple[str, list[tuple[str, str]], Any]]:
        return [(p, q, b) for m, p, q, b in self.sent if m == method and fragment in p]


def _example() -> tuple[dict[str, Any], dict[str, Any]]:
    docs = list(yaml.safe_load_all(EXAMPLE.read_text(encoding="utf-8")))
    job = next(d for d in docs if d["kind"] == "HyperFrameJob")
    runtime = next(d for d in docs if d["kind"] == "HyperFrameRuntime")
    job["metadata"].update(namespace="ns", uid="job-uid", generation=1, resourceVersion="6")
    return job, runtime


def _ghost(rank: int) -> dict[str, Any]:
    """A pod of gang generation 0 whose main container failed; the API server no longer has it."""
    return {
        "metadata": {
            "name": f"cpu-tiny-g0-{rank}",
            "namespace": "ns",
            "uid": f"ghost-uid-{rank}",
            "resourceVersion": "3",
            "labels": {LABEL_JOB: "cpu-tiny", LABEL_RANK: str(rank), LABEL_GENERATION: "0"},
        },
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Failed",
            "containerStatuses": [{"name": "trainer", "state": {"terminated": {"exitCode": 1}}}],
        },
    }


def _restarting(job: dict[str, Any], settings: PolicySettings) -> dict[str, Any]:
    """The job as stored after the failure of generation 0: Restarting, gang generation 1."""
    facts = facts_of(parse_job(job), job)
    now = datetime.now(UTC)
    pods = [p for p in (observe_pod(_ghost(0)),) if p is not None]
    pending = reconcile(facts, JobStatus(), [], {}, now, settings).status
    restarting = reconcile(facts, pending, pods, {}, now, settings).status
    assert restarting.phase == Phase.RESTARTING and restarting.gang_generation == 1
    return {**job, "status": restarting.to_dict()}


def _setup(
    route: Callable[[str, str, Any], Answer],
) -> tuple[Reconciler, Caches, StandInHttp, dict[str, Any]]:
    config = OperatorConfig(lease_name="", restart_backoff_seconds=0.001, status_port=0)
    settings = PolicySettings(
        restart_backoff_seconds=config.restart_backoff_seconds,
        restart_backoff_max_seconds=config.restart_backoff_max_seconds,
        node_not_ready_grace_seconds=config.node_not_ready_grace_seconds,
        terminating_grace_seconds=config.terminating_grace_seconds,
    )
    job, _ = _example()
    stored = _restarting(job, settings)
    caches = Caches()
    caches.put_job(stored)
    caches.pod_event("ADDED", _ghost(0))
    http = StandInHttp(route)
    kube = KubeApi(http, qps=1000, burst=1000, workers=4, metrics=Metrics())
    return Reconciler(kube=kube, caches=caches, config=config, metrics=Metrics()), caches, http, stored


def test_no_delete_goes_out_when_the_job_changed_since_it_was_read() -> None:
    """The decision to delete rests on a status the API server no longer has: the status did not
    change, but the write that checks the resourceVersion is still made, fails, and stops it."""
    holder: dict[str, Any] = {}

    def route(method: str, path: str, body: Any) -> Answer:
        if method == "PATCH":
            return 409, {"kind": "Status", "message": "the object has been modified"}
        if method == "GET" and path.endswith("/hyperframejobs/cpu-tiny"):
            return 200, {**holder["job"], "metadata": {**holder["job"]["metadata"], "resourceVersion": "9"}}
        return 200, {}

    reconciler, _, http, stored = _setup(route)
    holder["job"] = stored
    requeue = asyncio.run(reconciler(KEY))
    assert http.requests("DELETE") == [], "pods deleted on a view of the job the API server had replaced"
    patches = http.requests("PATCH", "/status")
    assert [b["metadata"] for _, _, b in patches] == [{"resourceVersion": "6"}]
    assert requeue == 0.0  # reconciled again at once, on the job as it is now


def test_a_pod_found_gone_on_delete_leaves_the_cache_and_the_next_gang_is_created() -> None:
    _, runtime = _example()

    def route(method: str, path: str, body: Any) -> Answer:
        if method == "DELETE":
            return 404, {"kind": "Status", "message": "pods not found"}
        if method == "GET" and "/hyperframeruntimes/" in path:
            return 200, runtime
        if method == "PATCH":
            return 200, {}
        return 201, body if isinstance(body, dict) else {}

    reconciler, caches, http, _ = _setup(route)
    requeue = asyncio.run(reconciler(KEY))
    [(path, _, body)] = http.requests("DELETE")
    assert path.endswith("/pods/cpu-tiny-g0-0")
    assert caches.pods_of(KEY) == [], "the pod the API server no longer has is still believed to exist"
    assert body["preconditions"] == {"uid": "ghost-uid-0"}
    assert requeue == 0.0  # decided again at once, on the corrected cache
    asyncio.run(reconciler(KEY))
    created = [
        b["metadata"]["labels"][LABEL_GENERATION]
        for p, q, b in http.requests("POST", "/pods")
        if ("dryRun", "All") not in q
    ]
    assert created == ["1"], "the gang of generation 1 was not created: the job is wedged in Restarting"


def test_the_pods_it_creates_are_in_the_cache_before_the_watch_reports_them() -> None:
    """A gang's pods are known from the creates' answers: a reconcile that runs before the watch
    delivers them (a big gang, a slow watch) sees every rank, not ranks that "disappeared"."""
    _, runtime = _example()
    answered = 0

    def route(method: str, path: str, body: Any) -> Answer:
        nonlocal answered
        if method == "DELETE":
            return 404, {"kind": "Status", "message": "pods not found"}
        if method == "GET" and "/hyperframeruntimes/" in path:
            return 200, runtime
        if method == "PATCH":
            return 200, {}
        if not isinstance(body, dict):
            return 201, {}
        answered += 1
        meta = {**body["metadata"], "uid": f"uid-{answered}", "resourceVersion": str(100 + answered)}
        return 201, {**body, "metadata": meta}

    reconciler, caches, http, _ = _setup(route)
    asyncio.run(reconciler(KEY))  # the ghost is found gone
    asyncio.run(reconciler(KEY))  # gang generation 1 is created
    created = [b for p, q, b in http.requests("POST", "/pods") if ("dryRun", "All") not in q]
    assert created, "no gang was created"
    cached = {p.name for p in caches.pods_of(KEY)}
    assert cached == {b["metadata"]["name"] for b in created}, (
        "created pods unknown until the watch reports them"
    )
    assert all(p.uid.startswith("uid-") for p in caches.pods_of(KEY))
