"""Node faults survived in real containers, on two real nodes `hf-real-0` and `hf-real-1`.

Against the session's cluster with HYPERFRAME_CLUSTER_REAL_NODES=2 (docs/local-cluster.md): the
local images (`make images`, reused when this session already pushed them), the chart's operator
pinned to hf-real-0, a CPU runtime whose pods ask for 1100m CPU, so no two of them fit one
2-CPU node. Faults come from `hyperframe_devcluster.node_faults` and act on the real parts: a
fault file the node shows its pods (the smoke gate's device check reads it), the kubelet
process, `kubectl drain`. In file order:

1. a 2-node job runs across both nodes: the gate's gloo all-reduce and the trainer's rendezvous
   cross the two pod networks, rank 0 found by its headless-Service name;
2. a 1-node job whose gate fails on hf-real-0: only hf-real-0 is excluded, the gang is created
   again on hf-real-1 and Succeeds;
3. a 2-node job with hf-real-0 bad: hf-real-0 is excluded, the gang no longer fits, and the job
   gets the Unschedulable condition instead of waiting Pending;
4. a 1-node job whose node dies mid-run (kubelet stopped, containers killed): the gang restarts
   on the other node from the checkpoint on the volume both nodes mount, restarts = 1;
5. a drain mid-run: the trainer gets SIGTERM, exits as preempted, the gang resumes on the other
   node from its snapshot and the restart is not counted against backoffLimit.

Each test prints the time from the fault to the gang Running again (`-s`); docs/local-cluster.md
records them. Where two real nodes cannot run here the tests skip with the reason (fail with
CI=true where the real node itself cannot run).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import pytest
from hyperframe.constants import LABEL_GENERATION, LABEL_JOB, MAIN_CONTAINER_NAME
from hyperframe_devcluster import demo, node_faults
from hyperframe_devcluster.cluster import LocalCluster
from hyperframe_devcluster.kube import Kubectl, poll
from hyperframe_devcluster.node import RealNode

pytestmark = pytest.mark.cluster

NS: Final = "e2e-nodes"
RUNTIME: Final = "two-nodes-cpu"
# Short waits where the defaults only make the test slower: progress every 2 s, a gang restart
# 2 s after a failure, a NotReady node's pods force-deleted after 10 s, an unplaceable gang
# reported after 30 s.
OPERATOR_ENV: Final = {
    "HYPERFRAME_PROGRESS_FLUSH_SECONDS": "2",
    "HYPERFRAME_RESTART_BACKOFF_SECONDS": "2",
    "HYPERFRAME_NODE_NOT_READY_GRACE_SECONDS": "10",
    "HYPERFRAME_UNSCHEDULABLE_TIMEOUT_SECONDS": "30",
}


@dataclass
class TwoNodes:
    cluster: LocalCluster
    kubectl: Kubectl
    nodes: dict[str, RealNode]


@pytest.fixture(scope="module")
def two_nodes(
    local_cluster: LocalCluster, real_nodes: list[RealNode], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TwoNodes]:
    registry = real_nodes[0].registry_address()
    assert registry is not None
    images = local_cluster.config.state_dir / "images"
    if not (images / "digests.json").exists():  # this session's registry has them once pushed
        demo.build_images(registry, images)
    home = tmp_path_factory.mktemp("helm")
    values = {
        **demo.real_node_placement("hf-real-0"),
        "operator": {"extraEnv": [{"name": k, "value": v} for k, v in OPERATOR_ENV.items()]},
    }
    result = demo.install_operator(local_cluster.kubeconfig, home, images, extra_values=values)
    assert result.returncode == 0, result.stdout + result.stderr
    kubectl = local_cluster.kubectl
    runtime = demo.real_node_runtime(images)
    runtime["metadata"]["name"] = RUNTIME
    runtime["spec"]["pod"].update(demo.real_node_placement(None))  # either real node
    runtime["spec"]["pod"]["resources"] = {"cpu": "1100m", "memory": "3Gi"}
    kubectl.apply([runtime])
    kubectl.run("create", "namespace", NS)
    yield TwoNodes(local_cluster, kubectl, {n.name: n for n in real_nodes})
    demo.helm(
        local_cluster.kubeconfig, home, "uninstall", demo.RELEASE, "-n", demo.RELEASE_NAMESPACE, "--wait"
    )
    kubectl.run("delete", "namespace", NS, "--wait=false", check=False)


@pytest.fixture(autouse=True)
def healthy_nodes_afterwards(two_nodes: TwoNodes) -> Iterator[None]:
    """Every test leaves both nodes as it found them: no job pod, no fault file, kubelet running,
    schedulable (a pod still terminating would take the next test's CPU)."""
    yield
    kubectl = two_nodes.kubectl
    kubectl.run("delete", "hfj", "--all", "-n", NS, "--wait=true", "--timeout=120s", check=False)
    kubectl.run("delete", "pods", "--all", "-n", NS, "--grace-period=0", "--force", check=False)
    poll(lambda: kubectl.json("get", "pods", "-n", NS)["items"], lambda pods: not pods,
         timeout_s=180, what=f"no pod left in {NS}")  # fmt: skip
    for name, node in two_nodes.nodes.items():
        node_faults.clear_device_fault(node)
        if node.pid(node.component("kubelet")) is None:
            node_faults.restart_kubelet(two_nodes.cluster, node)
        node_faults.uncordon(two_nodes.kubectl, name)


def _job(env: TwoNodes, name: str, *, nodes: int, frames: int, every: int, **spec: Any) -> dict[str, Any]:
    job = demo.demo_job(name, RUNTIME, demo.checkpoint_dir(NS, name), frames=frames, every_frames=every)
    if nodes == 1:
        job["spec"]["nodes"] = 1
        job["spec"]["parallelism"] = {"pipeline": 2, "data": 1}
    hooks = node_faults.job_fault_hooks(env.cluster)
    job["spec"]["volumes"] += hooks["volumes"]
    job["spec"]["volumeMounts"] = hooks["volumeMounts"]
    job["spec"]["env"] = hooks["env"]
    job["spec"].update(spec)
    return job


def _status(kubectl: Kubectl, name: str) -> dict[str, Any]:
    result = kubectl.run("get", "hfj", name, "-n", NS, "-o", "json", check=False)
    return dict(json.loads(result.stdout).get("status", {})) if result.returncode == 0 else {}


def _wait_status(
    kubectl: Kubectl, name: str, done: Callable[[dict[str, Any]], bool], what: str, timeout_s: float = 900
) -> dict[str, Any]:
    return poll(lambda: _status(kubectl, name), done, timeout_s=timeout_s, what=what, interval_s=1.0)


def _pods(kubectl: Kubectl, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl.json("get", "pods", "-n", NS, "-l", f"{LABEL_JOB}={name}")["items"]
    return items


def _generation(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["labels"][LABEL_GENERATION])


def _wait_gang_running(
    kubectl: Kubectl, name: str, *, generation_above: int, count: int
) -> list[dict[str, Any]]:
    """The pods of a gang newer than `generation_above`, once all `count` of them run."""

    def newer(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            p
            for p in pods
            if _generation(p) > generation_above and not p["metadata"].get("deletionTimestamp")
        ]

    def running(pods: list[dict[str, Any]]) -> bool:
        fresh = newer(pods)
        return len(fresh) == count and all(p["status"].get("phase") == "Running" for p in fresh)

    pods = poll(
        lambda: _pods(kubectl, name),
        running,
        timeout_s=600,
        what=f"a gang of job {name} newer than generation {generation_above} Running",
        interval_s=1,
    )
    return newer(pods)


def _events(kubectl: Kubectl, name: str) -> list[str]:
    out = kubectl.run(
        "get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name}",
        "--sort-by=.lastTimestamp", "-o", "custom-columns=REASON:.reason,MESSAGE:.message", check=False,
    ).stdout  # fmt: skip
    return out.splitlines()


def _resumed_frames(kubectl: Kubectl, pod: str) -> list[int]:
    logs = kubectl.run("logs", "-n", NS, pod, "-c", MAIN_CONTAINER_NAME, check=False).stdout
    return [int(m) for m in re.findall(r"resumed from \S+: (\d+) frames done", logs)]


def test_a_two_node_job_runs_across_both_real_nodes(two_nodes: TwoNodes) -> None:
    kubectl = two_nodes.kubectl
    applied = time.monotonic()
    kubectl.apply([_job(two_nodes, "across", nodes=2, frames=12, every=6)], namespace=NS)
    pods = _wait_gang_running(kubectl, "across", generation_above=-1, count=2)
    running_s = time.monotonic() - applied

    status = _wait_status(
        kubectl, "across", lambda s: s.get("phase") in {"Succeeded", "Failed"}, "job across"
    )
    assert status["phase"] == "Succeeded", status.get("message")
    assert {p["spec"]["nodeName"] for p in pods} == {"hf-real-0", "hf-real-1"}
    smoke = status["smokeTest"]
    assert smoke["passed"] is True
    assert {n["node"] for n in smoke["nodes"]} == {"hf-real-0", "hf-real-1"}
    assert status["restarts"] == 0
    # Rank 1 reached rank 0 by its headless-Service name (MASTER_ADDR), across the nodes.
    rank1 = next(p for p in pods if p["metadata"]["name"].endswith("-1"))
    master = next(e["value"] for e in rank1["spec"]["containers"][0]["env"] if e["name"] == "MASTER_ADDR")
    assert master.startswith(f"across-0.across.{NS}.svc"), master
    print(
        f"2-node job across hf-real-0 and hf-real-1: apply -> both pods Running {running_s:.1f}s "
        f"(image pull on the nodes included); busbw across nodes {smoke['busBandwidthGBps']:.3f} GB/s"
    )


def test_a_gate_failing_on_hf_real_0_excludes_it_alone_and_the_gang_succeeds_on_hf_real_1(
    two_nodes: TwoNodes,
) -> None:
    kubectl, nodes = two_nodes.kubectl, two_nodes.nodes
    node_faults.fail_device_check(nodes["hf-real-0"])
    # The first gang must meet the bad node: hf-real-1 takes no new pod until hf-real-0 is excluded.
    node_faults.cordon(kubectl, "hf-real-1")
    kubectl.apply([_job(two_nodes, "badnode", nodes=1, frames=6, every=3)], namespace=NS)
    status = _wait_status(
        kubectl,
        "badnode",
        lambda s: s.get("excludedNodes") or s.get("phase") == "Failed",
        "hf-real-0 excluded",
    )
    excluded_at = time.monotonic()
    assert status.get("excludedNodes") == ["hf-real-0"], status
    node_faults.uncordon(kubectl, "hf-real-1")
    [pod] = _wait_gang_running(kubectl, "badnode", generation_above=0, count=1)
    back_s = time.monotonic() - excluded_at

    status = _wait_status(
        kubectl, "badnode", lambda s: s.get("phase") in {"Succeeded", "Failed"}, "job badnode"
    )
    assert status["phase"] == "Succeeded", status.get("message")
    assert pod["spec"]["nodeName"] == "hf-real-1"
    assert status["excludedNodes"] == ["hf-real-0"]
    assert status["restarts"] == 1
    print(f"gate failed on hf-real-0 -> excluded; exclusion -> gang Running on hf-real-1: {back_s:.1f}s")


def test_a_two_node_job_with_one_node_excluded_is_reported_unschedulable(two_nodes: TwoNodes) -> None:
    kubectl, nodes = two_nodes.kubectl, two_nodes.nodes
    node_faults.fail_device_check(nodes["hf-real-0"])
    kubectl.apply([_job(two_nodes, "nofit", nodes=2, frames=6, every=3)], namespace=NS)
    status = _wait_status(kubectl, "nofit", lambda s: bool(s.get("excludedNodes")), "hf-real-0 excluded")
    excluded_at = time.monotonic()
    assert status["excludedNodes"] == ["hf-real-0"]

    def unschedulable(s: dict[str, Any]) -> bool:
        return any(c["type"] == "Unschedulable" and c["status"] == "True" for c in s.get("conditions", []))

    status = _wait_status(kubectl, "nofit", unschedulable, "the Unschedulable condition", timeout_s=300)
    condition = next(c for c in status["conditions"] if c["type"] == "Unschedulable")
    assert "hf-real-0" in json.dumps(status["excludedNodes"])
    assert condition["message"], condition
    print(
        f"2-node job, hf-real-0 excluded: exclusion -> Unschedulable condition {time.monotonic() - excluded_at:.1f}s "
        f"({condition['message'][:160]})"
    )


def test_a_node_lost_mid_run_restarts_the_gang_on_the_other_node_from_its_checkpoint(
    two_nodes: TwoNodes,
) -> None:
    kubectl, nodes = two_nodes.kubectl, two_nodes.nodes
    node_faults.cordon(kubectl, "hf-real-0")  # the job starts on hf-real-1, which then dies
    kubectl.apply([_job(two_nodes, "lost", nodes=1, frames=20, every=3)], namespace=NS)
    [first] = _wait_gang_running(kubectl, "lost", generation_above=-1, count=1)
    assert first["spec"]["nodeName"] == "hf-real-1"
    _wait_status(kubectl, "lost", lambda s: s.get("progress", {}).get("frame", 0) >= 6, "frame 6 of job lost")
    node_faults.uncordon(kubectl, "hf-real-0")

    lost_at = time.monotonic()
    assert node_faults.lose_node(nodes["hf-real-1"]) > 0
    [pod] = _wait_gang_running(kubectl, "lost", generation_above=_generation(first), count=1)
    back_s = time.monotonic() - lost_at

    status = _wait_status(kubectl, "lost", lambda s: s.get("phase") in {"Succeeded", "Failed"}, "job lost")
    assert status["phase"] == "Succeeded", status.get("message")
    assert pod["spec"]["nodeName"] == "hf-real-0"
    assert status["restarts"] == 1
    resumed = _resumed_frames(kubectl, pod["metadata"]["name"])
    assert resumed and resumed[0] >= 3, resumed
    print(
        f"node hf-real-1 lost (kubelet stopped, containers killed) -> gang Running on hf-real-0: {back_s:.1f}s"
    )


def test_a_drain_mid_run_preempts_the_trainer_which_resumes_on_the_other_node_uncounted(
    two_nodes: TwoNodes,
) -> None:
    kubectl = two_nodes.kubectl
    kubectl.apply([_job(two_nodes, "drained", nodes=1, frames=20, every=3)], namespace=NS)
    [first] = _wait_gang_running(kubectl, "drained", generation_above=-1, count=1)
    _wait_status(
        kubectl, "drained", lambda s: s.get("progress", {}).get("frame", 0) >= 6, "frame 6 of job drained"
    )
    node = first["spec"]["nodeName"]
    other = "hf-real-1" if node == "hf-real-0" else "hf-real-0"

    drained_at = time.monotonic()
    result = node_faults.drain(kubectl, node, pod_selector=f"{LABEL_JOB}=drained")
    assert result.returncode == 0, result.stdout + result.stderr
    [pod] = _wait_gang_running(kubectl, "drained", generation_above=_generation(first), count=1)
    back_s = time.monotonic() - drained_at

    status = _wait_status(
        kubectl, "drained", lambda s: s.get("phase") in {"Succeeded", "Failed"}, "job drained"
    )
    assert status["phase"] == "Succeeded", status.get("message")
    assert pod["spec"]["nodeName"] == other
    assert status["restarts"] == 0, (
        "a drain is a preemption: it must not count against backoffLimit",
        [(c["type"], c.get("reason"), c.get("message")) for c in status.get("conditions", [])],
        _events(kubectl, "drained"),
    )
    resumed = _resumed_frames(kubectl, pod["metadata"]["name"])
    assert resumed and resumed[0] >= 3, resumed
    print(f"drain of {node} -> gang Running on {other}: {back_s:.1f}s (SIGTERM, snapshot, exit 75 included)")
