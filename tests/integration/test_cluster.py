"""The local control plane behaves like a real GPU cluster (issue 2).

Covers: simulated GPU nodes and their resources; scheduling by kube-scheduler (resources and
taints); garbage collection by kube-controller-manager; the project's KWOK Stages (pods run,
init containers complete or fail with a chosen exit code and termination message, pods exit,
bad nodes, NotReady nodes); and that kubectl and helm talk to the built apiserver.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hyperframe_devcluster import Kubectl, LocalCluster, faults, paths, poll, sim

pytestmark = pytest.mark.cluster

GPU_NODES_SELECTOR = f"{sim.GPU_PRODUCT_LABEL}={sim.GPU_PRODUCT}"


def make_pod(
    name: str,
    *,
    gpus: int = 0,
    tolerate_gpu: bool = True,
    annotations: dict[str, str] | None = None,
    init: bool = False,
    node: str | None = None,
    owner: dict[str, str] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "trainer", "image": "registry.invalid/trainer:sim"}
    if gpus:
        container["resources"] = {"limits": {sim.GPU_RESOURCE: str(gpus)}}
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if tolerate_gpu:
        spec["tolerations"] = [sim.GPU_TOLERATION]
    if init:
        spec["initContainers"] = [{"name": "smoke-gate", "image": "registry.invalid/smoke:sim"}]
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    metadata: dict[str, Any] = {"name": name, "annotations": annotations or {}}
    if owner:
        metadata["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def get_pod(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any]:
    pod: dict[str, Any] = kubectl.json("get", "pod", name, "-n", namespace)
    return pod


def wait_phase(kubectl: Kubectl, namespace: str, name: str, phase: str) -> dict[str, Any]:
    return poll(
        lambda: get_pod(kubectl, namespace, name),
        lambda pod: pod.get("status", {}).get("phase") == phase,
        timeout_s=90,
        what=f"pod {namespace}/{name} phase {phase}",
    )


def terminated(status: dict[str, Any], key: str, container: str) -> dict[str, Any]:
    (entry,) = [s for s in status.get(key, []) if s["name"] == container]
    state: dict[str, Any] = entry["state"]["terminated"]
    return state


def test_nodes_advertise_eight_gpus_rdma_and_the_gpu_taint(
    local_cluster: LocalCluster, kubectl: Kubectl
) -> None:
    listing = kubectl.run("get", "nodes", "-l", GPU_NODES_SELECTOR).stdout
    nodes = kubectl.json("get", "nodes", "-l", GPU_NODES_SELECTOR)["items"]

    expected = [sim.gpu_node_name(i) for i in range(local_cluster.config.gpu_nodes)]
    assert sorted(n["metadata"]["name"] for n in nodes) == expected
    for node in nodes:
        assert node["metadata"]["name"] in listing
        allocatable = node["status"]["allocatable"]
        assert allocatable[sim.GPU_RESOURCE] == "8"
        assert allocatable[sim.RDMA_RESOURCE] == "1k"
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready[0]["status"] == "True"
        taints = [(t["key"], t.get("value"), t["effect"]) for t in node["spec"].get("taints", [])]
        assert (sim.GPU_TAINT_KEY, sim.GPU_TAINT_VALUE, "NoSchedule") in taints


def test_pod_with_eight_gpus_is_scheduled_and_runs(kubectl: Kubectl, namespace: str) -> None:
    kubectl.apply([make_pod("full-node", gpus=8)], namespace=namespace)

    pod = wait_phase(kubectl, namespace, "full-node", "Running")

    assert pod["spec"]["nodeName"].startswith("hf-gpu-")
    scheduled = kubectl.json(
        "get", "events", "-n", namespace, "--field-selector", "involvedObject.name=full-node,reason=Scheduled"
    )["items"]
    assert [e["reportingComponent"] for e in scheduled] == ["default-scheduler"]


def _failed_scheduling_messages(kubectl: Kubectl, namespace: str, pod: str) -> list[str]:
    events = kubectl.json(
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        f"involvedObject.name={pod},reason=FailedScheduling",
    )["items"]
    return [str(e.get("message") or e.get("note", "")) for e in events]


def test_pod_with_nine_gpus_stays_pending_with_insufficient_gpu(kubectl: Kubectl, namespace: str) -> None:
    kubectl.apply([make_pod("too-big", gpus=9)], namespace=namespace)

    messages = poll(
        lambda: _failed_scheduling_messages(kubectl, namespace, "too-big"),
        lambda found: any("Insufficient nvidia.com/gpu" in m for m in found),
        timeout_s=90,
        what="a FailedScheduling event naming Insufficient nvidia.com/gpu",
    )

    assert messages
    pod = get_pod(kubectl, namespace, "too-big")
    assert pod["status"]["phase"] == "Pending"
    assert not pod["spec"].get("nodeName")


def test_gpu_pod_without_the_toleration_is_not_scheduled(kubectl: Kubectl, namespace: str) -> None:
    kubectl.apply([make_pod("no-toleration", gpus=1, tolerate_gpu=False)], namespace=namespace)

    poll(
        lambda: _failed_scheduling_messages(kubectl, namespace, "no-toleration"),
        lambda found: any("untolerated taint" in m and sim.GPU_TAINT_KEY in m for m in found),
        timeout_s=90,
        what="a FailedScheduling event naming the untolerated GPU taint",
    )


def test_deleting_an_owner_garbage_collects_its_pods(kubectl: Kubectl, namespace: str) -> None:
    kubectl.run("create", "configmap", "owner", "-n", namespace, "--from-literal=k=v")
    uid = kubectl.json("get", "configmap", "owner", "-n", namespace)["metadata"]["uid"]
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}
    kubectl.apply([make_pod(f"dependent-{i}", owner=owner) for i in range(2)], namespace=namespace)
    kubectl.apply([make_pod("bystander")], namespace=namespace)
    wait_phase(kubectl, namespace, "dependent-0", "Running")

    kubectl.run("delete", "configmap", "owner", "-n", namespace)

    remaining = poll(
        lambda: [p["metadata"]["name"] for p in kubectl.json("get", "pods", "-n", namespace)["items"]],
        lambda names: not any(n.startswith("dependent-") for n in names),
        timeout_s=90,
        what="the garbage collector to delete the owner's pods",
    )
    assert remaining == ["bystander"]


def test_pod_annotated_to_fail_ends_failed_with_exit_code_and_message(
    kubectl: Kubectl, namespace: str
) -> None:
    annotations = {sim.ANNOTATION_EXIT_CODE: "42", sim.ANNOTATION_MESSAGE: "CUDA error: out of memory"}
    kubectl.apply([make_pod("crashes", annotations=annotations)], namespace=namespace)

    pod = wait_phase(kubectl, namespace, "crashes", "Failed")

    state = terminated(pod["status"], "containerStatuses", "trainer")
    assert (state["exitCode"], state["reason"], state["message"]) == (
        42,
        "Error",
        "CUDA error: out of memory",
    )


def test_running_pod_told_to_finish_succeeds(kubectl: Kubectl, namespace: str) -> None:
    kubectl.apply([make_pod("finishes", gpus=8)], namespace=namespace)
    wait_phase(kubectl, namespace, "finishes", "Running")

    faults.finish_pod(kubectl, namespace, "finishes", exit_code=0, message="trained 10 frames")

    pod = wait_phase(kubectl, namespace, "finishes", "Succeeded")
    state = terminated(pod["status"], "containerStatuses", "trainer")
    assert (state["exitCode"], state["reason"], state["message"]) == (0, "Completed", "trained 10 frames")


def test_init_container_completes_with_the_chosen_message(kubectl: Kubectl, namespace: str) -> None:
    message = json.dumps({"result": "pass", "busbw_gbps": 390.5})
    kubectl.apply(
        [make_pod("gated", gpus=8, init=True, annotations={sim.ANNOTATION_INIT_MESSAGE: message})],
        namespace=namespace,
    )

    pod = wait_phase(kubectl, namespace, "gated", "Running")

    state = terminated(pod["status"], "initContainerStatuses", "smoke-gate")
    assert (state["exitCode"], state["reason"], state["message"]) == (0, "Completed", message)


def test_init_container_fails_with_the_chosen_exit_code_and_message(kubectl: Kubectl, namespace: str) -> None:
    annotations = {
        sim.ANNOTATION_INIT_EXIT_CODE: "2",
        sim.ANNOTATION_INIT_MESSAGE: "config error: shm too small",
    }
    kubectl.apply([make_pod("gate-fails", init=True, annotations=annotations)], namespace=namespace)

    pod = wait_phase(kubectl, namespace, "gate-fails", "Failed")

    state = terminated(pod["status"], "initContainerStatuses", "smoke-gate")
    assert (state["exitCode"], state["reason"], state["message"]) == (
        2,
        "Error",
        "config error: shm too small",
    )
    assert "running" not in pod["status"]["containerStatuses"][0]["state"]


def last_gpu_node(cluster: LocalCluster) -> str:
    return sim.gpu_node_name(cluster.config.gpu_nodes - 1)


@pytest.fixture
def clear_outcomes(kubectl: Kubectl) -> Iterator[None]:
    yield
    faults.clear_node_faults(kubectl)


@pytest.mark.usefixtures("clear_outcomes")
def test_node_outcomes_decide_the_gate_of_pods_nobody_annotated(
    local_cluster: LocalCluster, kubectl: Kubectl, namespace: str
) -> None:
    bad, good = last_gpu_node(local_cluster), sim.gpu_node_name(0)
    report = json.dumps({"node": good, "result": "pass", "busbw_gbps": 401.2})
    faults.fail_init_containers_on_node(kubectl, bad, exit_code=1, message="GPU 5: XID 79, fell off the bus")
    faults.set_init_outcome(kubectl, good, exit_code=0, message=report)

    kubectl.apply(
        [make_pod("on-bad-node", init=True, node=bad), make_pod("on-good-node", init=True, node=good)],
        namespace=namespace,
    )

    failed = wait_phase(kubectl, namespace, "on-bad-node", "Failed")
    running = wait_phase(kubectl, namespace, "on-good-node", "Running")
    state = terminated(failed["status"], "initContainerStatuses", "smoke-gate")
    assert (state["exitCode"], state["message"]) == (1, "GPU 5: XID 79, fell off the bus")
    state = terminated(running["status"], "initContainerStatuses", "smoke-gate")
    assert (state["exitCode"], state["reason"], state["message"]) == (0, "Completed", report)


def _node_ready(kubectl: Kubectl, node: str) -> dict[str, Any]:
    obj = kubectl.json("get", "node", node)
    (ready,) = [c for c in obj["status"]["conditions"] if c["type"] == "Ready"]
    return {
        "status": ready["status"],
        "message": ready.get("message"),
        "taints": obj["spec"].get("taints", []),
    }


def test_node_can_be_made_not_ready_and_recover(local_cluster: LocalCluster, kubectl: Kubectl) -> None:
    node = last_gpu_node(local_cluster)
    faults.set_node_not_ready(kubectl, node, "GPU XID 48: double-bit ECC error")
    try:
        state = poll(
            lambda: _node_ready(kubectl, node),
            lambda s: (
                s["status"] == "False"
                and any(t["key"] == "node.kubernetes.io/not-ready" for t in s["taints"])
            ),
            timeout_s=90,
            what=f"{node} NotReady and tainted by the node lifecycle controller",
        )
        assert state["message"] == "GPU XID 48: double-bit ECC error"
    finally:
        faults.set_node_ready(kubectl, node)
    poll(
        lambda: _node_ready(kubectl, node),
        lambda s: (
            s["status"] == "True" and not any(t["key"].startswith("node.kubernetes.io/") for t in s["taints"])
        ),
        timeout_s=90,
        what=f"{node} Ready again and untainted",
    )


def test_kubectl_and_helm_talk_to_the_built_apiserver(
    local_cluster: LocalCluster, kubectl: Kubectl, kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    versions = json.loads(kubectl.run("version", "-o", "json").stdout)
    assert versions["serverVersion"]["gitVersion"] == paths.pins().kubernetes
    assert versions["clientVersion"]["gitVersion"] == paths.pins().kubernetes

    helm = [str(paths.helm()), f"--kubeconfig={kubeconfig}", "-n", namespace]
    assert (
        paths.pins().helm
        in subprocess.run([*helm, "version", "--short"], capture_output=True, text=True, check=True).stdout
    )
    chart = tmp_path / "probe"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: probe\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\ndata:\n  release: {{ .Release.Name | quote }}\n"
    )
    subprocess.run(
        [*helm, "install", "probe", str(chart), "--wait"], capture_output=True, text=True, check=True
    )

    data = kubectl.json("get", "configmap", "probe", "-n", namespace)["data"]
    releases = json.loads(
        subprocess.run([*helm, "list", "-o", "json"], capture_output=True, text=True, check=True).stdout
    )
    assert data == {"release": "probe"}
    assert [(r["name"], r["status"]) for r in releases] == [("probe", "deployed")]
