"""The fences of the operator's writes, checked against the real API server.

- A pod deletion carries the pod's uid: once the name belongs to a newer pod, the old deletion is
  refused and the newer pod stays.
- The empty status write the reconciler makes before acting on an unchanged status still checks
  the resourceVersion: on a job that changed since it was read, it fails with a conflict.
- A pod deleted while no watch saw it leaves the cache at the next full listing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hyperframe.constants import LABEL_GENERATION, LABEL_JOB, LABEL_MANAGED_BY, LABEL_RANK, MANAGED_BY
from hyperframe.controller.caches import Caches
from hyperframe.controller.kube import Conflict, KubeApi, api_client_for
from hyperframe.controller.metrics import Metrics
from hyperframe_devcluster.kube import Kubectl
from kubernetes import client, config
from operator_harness import gpu_job, install_api

pytestmark = pytest.mark.cluster


@pytest.fixture
def kube(kubeconfig: Path) -> Iterator[KubeApi]:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
    api = KubeApi(
        api_client_for(configuration, 4, identity="fence-test"),
        qps=100,
        burst=100,
        workers=4,
        metrics=Metrics(),
    )
    yield api
    api.close()


def _pod(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {LABEL_MANAGED_BY: MANAGED_BY, LABEL_JOB: "j", LABEL_RANK: "0", LABEL_GENERATION: "0"},
        },
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/none:0"}]},
    }


def _uid(kube: KubeApi, namespace: str, name: str) -> str | None:
    pod = asyncio.run(kube.get_pod(namespace, name))
    return None if pod is None else str(pod["metadata"]["uid"])


def test_a_delete_naming_an_old_uid_leaves_the_newer_pod_of_that_name(kube: KubeApi, namespace: str) -> None:
    assert asyncio.run(kube.create(namespace, _pod("p", namespace)))
    first = _uid(kube, namespace, "p")
    assert first is not None
    assert asyncio.run(kube.delete_pod(namespace, "p", uid=first, force=True))
    assert _uid(kube, namespace, "p") is None  # grace period 0 on an unscheduled pod: gone at once
    assert asyncio.run(kube.create(namespace, _pod("p", namespace)))
    second = _uid(kube, namespace, "p")
    assert second is not None and second != first

    assert asyncio.run(kube.delete_pod(namespace, "p", uid=first, force=True)) is False  # 409: refused
    assert _uid(kube, namespace, "p") == second
    assert asyncio.run(kube.delete_pod(namespace, "p", uid=second, force=True)) is True


def test_an_empty_status_write_still_checks_the_resource_version(
    kube: KubeApi, kubectl: Kubectl, namespace: str
) -> None:
    install_api(kubectl)
    kubectl.apply([gpu_job("fenced", namespace, nodes=1)])
    job = asyncio.run(kube.get_job(namespace, "fenced"))
    assert job is not None
    read_at = str(job["metadata"]["resourceVersion"])
    # Another writer changes the job after it was read.
    asyncio.run(kube.patch_job_status(namespace, "fenced", {"message": "moved on"}, resource_version=None))
    with pytest.raises(Conflict):
        asyncio.run(kube.patch_job_status(namespace, "fenced", {}, resource_version=read_at))
    current = asyncio.run(kube.get_job(namespace, "fenced"))
    assert current is not None
    fresh = asyncio.run(
        kube.patch_job_status(
            namespace, "fenced", {}, resource_version=str(current["metadata"]["resourceVersion"])
        )
    )
    assert (
        fresh["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]
    )  # no-op: no new version


def test_a_pod_deleted_unseen_leaves_the_cache_at_the_next_listing(kube: KubeApi, namespace: str) -> None:
    caches = Caches()
    path = f"/api/v1/namespaces/{namespace}/pods"
    selector = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
    for name in ("kept", "gone"):
        assert asyncio.run(kube.create(namespace, _pod(name, namespace)))
    items, version = asyncio.run(kube.list_snapshot("pods", path, label_selector=selector))
    caches.resync_pods(items, version, namespace=namespace)
    assert sorted(p.name for p in caches.pods_of((namespace, "j"))) == ["gone", "kept"]
    gone = _uid(kube, namespace, "gone")
    assert gone is not None
    assert asyncio.run(kube.delete_pod(namespace, "gone", uid=gone, force=True))  # no watch sees this
    items, version = asyncio.run(kube.list_snapshot("pods", path, label_selector=selector))
    assert caches.resync_pods(items, version, namespace=namespace) == {(namespace, "j")}
    assert [p.name for p in caches.pods_of((namespace, "j"))] == ["kept"]
