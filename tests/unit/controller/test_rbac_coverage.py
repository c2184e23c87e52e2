"""Every API request the operator's client can make is covered by a rule in controller/rbac.py.

Each KubeApi method is called against a recording stand-in for the HTTP layer; the (verb,
resource) pairs it counts must all be allowed by OPERATOR_RULES, so a new call without RBAC fails here.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hyperframe.constants import GROUP
from hyperframe.controller.kube import KubeApi
from hyperframe.controller.metrics import Metrics
from hyperframe.controller.rbac import OPERATOR_RULES
from hyperframe.render.objects import PODGROUP_API


class _Response:
    status = 200
    reason = "OK"

    def read(self) -> bytes:
        return b'{"status": {"authenticated": false}}'


class _RecordingClient:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []

    def param_serialize(self, *, method: str, resource_path: str, **_: Any) -> tuple[str, str]:
        return method, resource_path

    def call_api(self, method: str, path: str, **_: Any) -> _Response:
        self.requests.append((method, path))
        return _Response()


def test_every_client_call_is_allowed_by_the_rbac_rules() -> None:
    metrics = Metrics()
    client = _RecordingClient()
    api = KubeApi(client, qps=1000, burst=1000, workers=2, metrics=metrics)

    async def exercise() -> None:
        await api.get_job("ns", "j")
        await api.patch_job_status("ns", "j", {"phase": "Running"}, resource_version="1")
        await api.delete_job("ns", "j", uid="u")
        await api.get_runtime("r")
        for obj in (
            {"apiVersion": "v1", "kind": "Pod"},
            {"apiVersion": "v1", "kind": "Service"},
            {"apiVersion": "v1", "kind": "ConfigMap"},
            *({"apiVersion": v, "kind": "PodGroup"} for v in PODGROUP_API.values()),
        ):
            await api.create("ns", obj)
        await api.delete_pod("ns", "p", uid="u", force=True)
        await api.get_pod("ns", "p")
        await api.label_pod("ns", "p", {"a": None})
        await api.create_event("ns", {"kind": "Event"})
        await api.review_token("t", "aud")
        await api.list_all("pods", "/api/v1/pods", label_selector="a=b")
        await api.list_all("nodes", "/api/v1/nodes")

    asyncio.run(exercise())
    api.close()
    used = {
        (sample.labels["verb"], sample.labels["resource"])
        for metric in metrics.api_requests.collect()
        for sample in metric.samples
        if sample.name.endswith("_total")
    }
    allowed = {(verb, res) for rule in OPERATOR_RULES for res in rule.resources for verb in rule.verbs}
    assert used, "nothing was recorded"
    missing = sorted(pair for pair in used if pair not in allowed)
    assert not missing, f"API calls without an RBAC rule in controller/rbac.py: {missing}"
    groups = {rule.api_group for rule in OPERATOR_RULES}
    assert GROUP in groups and "authentication.k8s.io" in groups
    assert {v.rpartition("/")[0] for v in PODGROUP_API.values()} <= groups
    assert len(client.requests) >= 14
