"""A HyperFrameJob behind a real Kueue on the real control plane (KWOK GPU nodes for quota).

The module starts its own cluster with Kueue enabled (`ClusterConfig(kueue=True)`, two nodes of
8 GPUs) and the operator on the host. The ClusterQueue has 16 GPUs: one 2-node job fills it.
One story, in order: a second job waits queued (gated pods, a Pending status and a `Queued`
event); when the first job is deleted it is admitted as one gang; a higher-priority pod group
preempts it and its gang is removed whole; when that goes away it is admitted again and runs a
new gang generation. A sampler checks throughout that no pod of the job is ever released or
bound without Kueue having admitted the whole gang.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hyperframe.constants import LABEL_JOB
from hyperframe_devcluster import paths
from hyperframe_devcluster.cluster import LocalCluster
from hyperframe_devcluster.config import ClusterConfig
from hyperframe_devcluster.kube import Kubectl
from hyperframe_devcluster.sim import GPU_RESOURCE
from operator_harness import OperatorProcess, condition, gpu_job, install_api, status, wait

pytestmark = pytest.mark.cluster

KUEUE_API = "kueue.x-k8s.io/v1beta2"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
NAMESPACE = "team-a"
QUEUE = "gpus"
NODES = 2


def platform_objects(namespace: str) -> list[dict[str, Any]]:
    """What a platform team applies (docs/operator.md shows the same objects as YAML)."""
    quota = {"cpu": "1000", "memory": "100Ti", GPU_RESOURCE: "16"}
    return [
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": "gpu-nodes"}},
        {
            "apiVersion": KUEUE_API,
            "kind": "ClusterQueue",
            "metadata": {"name": "gpu-cluster"},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": list(quota),
                        "flavors": [
                            {
                                "name": "gpu-nodes",
                                "resources": [{"name": k, "nominalQuota": v} for k, v in quota.items()],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": "gpu-cluster"},
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "urgent"},
            "value": 1000,
            "description": "preempts training jobs of the default priority",
        },
    ]


def urgent_pod_group(namespace: str, name: str, size: int) -> list[dict[str, Any]]:
    """A higher-priority Kueue plain pod group taking the whole quota (size pods x 8 GPUs)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": namespace,
                "labels": {
                    "kueue.x-k8s.io/queue-name": QUEUE,
                    "kueue.x-k8s.io/pod-group-name": name,
                    "kueue.x-k8s.io/priority-class": "urgent",
                    "app": name,
                },
                # Deleted pods are not replaced: the group's workload ends and frees its quota.
                "annotations": {
                    "kueue.x-k8s.io/pod-group-total-count": str(size),
                    "kueue.x-k8s.io/retriable-in-group": "false",
                },
            },
            "spec": {
                "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.example/urgent:1",
                        "resources": {"limits": {GPU_RESOURCE: "8"}, "requests": {"cpu": "1"}},
                    }
                ],
            },
        }
        for i in range(size)
    ]


@pytest.fixture(scope="module")
def kueue_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    if paths.missing_binaries():
        pytest.fail(
            f"control plane not built ({', '.join(paths.missing_binaries())}); run `make cluster-build`"
        )
    state = paths.repo_root() / ".cluster" / f"kueue-{tmp_path_factory.getbasetemp().name}"
    cluster = LocalCluster(
        ClusterConfig(state_dir=state, gpu_nodes=NODES, system_nodes=1, kueue=True, die_with_parent=True)
    )
    try:
        cluster.up(reuse=False)
        yield cluster
    finally:
        cluster.down()
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="module")
def kk(kueue_cluster: LocalCluster) -> Kubectl:
    kubectl = kueue_cluster.kubectl
    kubectl.run("create", "namespace", NAMESPACE)
    kubectl.apply(platform_objects(NAMESPACE))
    return kubectl


@pytest.fixture(scope="module")
def op(
    kk: Kubectl, kueue_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    install_api(kk)
    process = OperatorProcess(kueue_cluster.kubeconfig, tmp_path_factory.mktemp("operator") / "operator.log")
    process.start()
    try:
        yield process
    finally:
        process.stop()


def queued_job(name: str) -> dict[str, Any]:
    job = gpu_job(name, NAMESPACE, nodes=NODES)
    job["spec"]["queueName"] = QUEUE
    return job


def job_pods(kk: Kubectl, name: str) -> list[dict[str, Any]]:
    items = kk.json("get", "pods", "-n", NAMESPACE, "-l", f"{LABEL_JOB}={name}")["items"]
    return [dict(p) for p in items if not p["metadata"].get("deletionTimestamp")]


def gated(pod: dict[str, Any]) -> bool:
    return any(g["name"] == ADMISSION_GATE for g in pod["spec"].get("schedulingGates") or ())


def workload(kk: Kubectl, group: str) -> dict[str, Any]:
    """The Workload Kueue made for a pod group (named after the group: one per gang generation)."""
    result = kk.run("get", "workloads.kueue.x-k8s.io", group, "-n", NAMESPACE, "-o", "json", check=False)
    return dict(json.loads(result.stdout)) if result.returncode == 0 else {}


def admitted(wl: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Admitted" and c["status"] == "True"
        for c in wl.get("status", {}).get("conditions") or ()
    )


def admitted_count(wl: dict[str, Any]) -> int:
    assignments = wl.get("status", {}).get("admission", {}).get("podSetAssignments") or ()
    return sum(int(a.get("count", 0)) for a in assignments)


class GangSampler:
    """Samples the job's pods and Workload; records every moment where part of the gang was
    released (ungated) or bound without Kueue's admission of the whole gang."""

    def __init__(self, kk: Kubectl, name: str) -> None:
        self.kk, self.name = kk, name
        self.samples = 0
        self.partial: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> GangSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            pods = [p for p in job_pods(self.kk, self.name) if not _terminating(p)]
            released = [p for p in pods if not gated(p) or p["spec"].get("nodeName")]
            for group in {p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] for p in released}:
                wl = workload(self.kk, group)
                if not (admitted(wl) and admitted_count(wl) == NODES):
                    names = [p["metadata"]["name"] for p in released]
                    self.partial.append(f"{names} released, workload {group} admitted={admitted(wl)}")
            self.samples += 1
            self._stop.wait(0.2)


def _terminating(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "TerminationTarget" for c in pod.get("status", {}).get("conditions") or ())


def whole_gang_bound(pods: list[dict[str, Any]]) -> bool:
    """Every one of the gang's NODES pods is bound to a node."""
    return len(pods) == NODES and all(p["spec"].get("nodeName") for p in pods)


def readmitted(
    op: OperatorProcess, kk: Kubectl, release: tuple[str, ...], *, what: str
) -> tuple[float, dict[str, Any]]:
    """Delete ``release`` (what holds the quota); wait until job "second"'s whole gang is bound and
    the job runs. Returns the seconds from the delete to the gang bound, and the job's status."""
    kk.run("delete", *release, "-n", NAMESPACE, "--wait=false")
    freed = time.monotonic()
    wait(op, lambda: job_pods(kk, "second"), whole_gang_bound, what=what, timeout_s=120)
    to_bound = time.monotonic() - freed
    st = wait(
        op,
        lambda: status(kk, NAMESPACE, "second"),
        lambda s: s.get("phase") == "Running",
        what=f"{what}: running",
    )
    return to_bound, st


def test_a_job_queues_is_admitted_whole_is_preempted_whole_and_resumes(
    op: OperatorProcess, kk: Kubectl
) -> None:
    kk.apply([queued_job("first")])
    wait(
        op, lambda: status(kk, NAMESPACE, "first"), lambda st: st.get("phase") == "Running", what="first runs"
    )

    with GangSampler(kk, "second") as sampler:
        kk.apply([queued_job("second")])
        pods = wait(
            op,
            lambda: job_pods(kk, "second"),
            lambda ps: len(ps) == NODES and all(gated(p) for p in ps),
            what="second's pods created and held by Kueue's admission gate",
        )
        st = wait(
            op,
            lambda: status(kk, NAMESPACE, "second"),
            lambda s: condition(s, "Queued").get("status") == "True",
            what="second says it is queued",
        )
        assert st["phase"] == "Pending"
        assert QUEUE in condition(st, "Queued")["message"]
        reasons = {e["reason"] for e in kk.json("get", "events", "-n", NAMESPACE)["items"]}
        assert "Queued" in reasons
        assert not any(p["spec"].get("nodeName") for p in pods)

        to_bound, st = readmitted(
            op, kk, ("hyperframejob", "first"), what="second's whole gang admitted and bound"
        )
        assert condition(st, "Queued").get("status") == "False"
        print(
            f"\nquota freed (first deleted) -> all {NODES} pods of second admitted and bound: {to_bound:.2f}s"
        )

        kk.apply(urgent_pod_group(NAMESPACE, "urgent", NODES))
        st = wait(
            op,
            lambda: status(kk, NAMESPACE, "second"),
            lambda s: condition(s, "Queued").get("status") == "True" and s.get("gangGeneration", 0) >= 1,
            what="second preempted: a new gang generation queued again",
            timeout_s=120,
        )
        wait(
            op,
            lambda: kk.json("get", "pods", "-n", NAMESPACE, "-l", "app=urgent")["items"],
            whole_gang_bound,
            what="the urgent pod group runs",
            timeout_s=120,
        )
        assert all(gated(p) for p in job_pods(kk, "second")), "the preempted gang waits whole"

        to_bound, _ = readmitted(op, kk, ("pods", "-l", "app=urgent"), what="second admitted again")
        print(
            f"quota freed (urgent deleted) -> all {NODES} pods of second re-admitted and bound: {to_bound:.2f}s"
        )

    assert sampler.samples > 10
    assert sampler.partial == [], sampler.partial
    print(f"gang sampler: {sampler.samples} samples, no partial gang")
