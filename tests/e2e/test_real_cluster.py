"""The whole product for real: `helm install` onto the real node, then HyperFrameJobs in real containers.

Against the session's cluster with its real node `hf-real-0` (docs/local-cluster.md): the local
profile's images are built and pushed to the cluster's registry (`make images`), the chart is
installed with those digests and its operator pod runs on the real node, and CPU jobs of
examples/cpu-2node.yaml (2 pods x 2 ranks, pipeline 2 x data 2) run there: the smoke gate as an
init container (gloo across the two pods, rendezvous at rank 0's headless-Service name), then
launcher -> torchrun -> the scheduler runtime, progress posted to the operator's in-cluster
endpoint, checkpoints on a shared host directory. The tests run in file order on one operator:

1. the operator pod: real node, pinned digest, non-root, read-only root filesystem; `helm test`;
2. a job runs gate and training to Succeeded, with smoke results and moving progress in status;
3. a trainer killed mid-run: the gang restarts under a new generation, resumes from the last
   complete checkpoint (not frame 0) and Succeeds with restarts = 1;
4. a gate that cannot pass (an allowed override demanding an impossible bus bandwidth) fails the
   job with the reason, the node recorded;
5. deleting a running job removes every pod, Service and ConfigMap, with no operator error loop;
6. restarting the operator pod mid-run: the job carries on, no pod is created twice;
7. `helm upgrade` to 2 replicas and `kubectl rollout restart` complete (a standby is Ready), the
   leader alone carries the leader label the Service selects, and a job's progress reaches status,
   its final frame included; the release goes back to 1 replica.

Where the real node cannot run here these tests skip with the reason (fail with CI=true).
Timings are printed (`-s`) and recorded in docs/operator.md.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hyperframe.constants import LABEL_GENERATION, LABEL_JOB, LABEL_OPERATOR_LEADER, MAIN_CONTAINER_NAME
from hyperframe_devcluster import demo
from hyperframe_devcluster.cluster import LocalCluster
from hyperframe_devcluster.kube import Kubectl, poll
from hyperframe_devcluster.node import RealNode

pytestmark = pytest.mark.cluster

NS = "e2e-real"
OPERATOR_SELECTOR = "app.kubernetes.io/name=hyperframe-operator,app.kubernetes.io/component=operator"
# Progress writes every 2 s (default 10 s), so a test sees FRAME move within a short job.
FLUSH: dict[str, Any] = {
    "operator": {"extraEnv": [{"name": "HYPERFRAME_PROGRESS_FLUSH_SECONDS", "value": "2"}]}
}


@dataclass
class Installed:
    cluster: LocalCluster
    images: Path
    helm_home: Path
    runtime: str
    kubectl: Kubectl
    timings: dict[str, float] = field(default_factory=dict)


@pytest.fixture(scope="module")
def installed(
    local_cluster: LocalCluster, real_node: RealNode, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    registry = real_node.registry_address()
    assert registry is not None
    images = local_cluster.config.state_dir / "images"
    start = time.monotonic()
    demo.build_images(registry, images)
    built = time.monotonic() - start
    home = tmp_path_factory.mktemp("helm")
    start = time.monotonic()
    result = demo.install_operator(local_cluster.kubeconfig, home, images, extra_values=FLUSH)
    assert result.returncode == 0, result.stdout + result.stderr
    install_s = time.monotonic() - start
    kubectl = local_cluster.kubectl
    runtime = demo.real_node_runtime(images)
    runtime["metadata"]["name"] = "real-node-cpu"
    runtime["spec"]["allowedOverrides"] = sorted({*runtime["spec"].get("allowedOverrides", []),
                                                  "smoke.minBusBandwidthGBps"})  # fmt: skip
    kubectl.apply([runtime])
    kubectl.run("create", "namespace", NS)
    print(f"images built and pushed in {built:.0f}s; helm install --wait {install_s:.0f}s")
    yield Installed(
        local_cluster, images, home, "real-node-cpu", kubectl, {"images": built, "install": install_s}
    )
    demo.helm(
        local_cluster.kubeconfig, home, "uninstall", demo.RELEASE, "-n", demo.RELEASE_NAMESPACE, "--wait"
    )
    kubectl.run("delete", "namespace", NS, "--wait=false", check=False)


def _job(inst: Installed, name: str, **spec: Any) -> dict[str, Any]:
    frames = spec.pop("frames", 12)
    every = spec.pop("every_frames", 4)
    job = demo.demo_job(name, inst.runtime, demo.checkpoint_dir(NS, name), frames=frames, every_frames=every)
    job["spec"].update(spec)
    return job


def _status(kubectl: Kubectl, name: str) -> dict[str, Any]:
    result = kubectl.run("get", "hfj", name, "-n", NS, "-o", "json", check=False)
    return dict(json.loads(result.stdout).get("status", {})) if result.returncode == 0 else {}


def _job_pods(kubectl: Kubectl, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl.json("get", "pods", "-n", NS, "-l", f"{LABEL_JOB}={name}")["items"]
    return items


def _wait_status(kubectl: Kubectl, name: str, done: Any, what: str, timeout_s: float = 900) -> dict[str, Any]:
    return poll(lambda: _status(kubectl, name), done, timeout_s=timeout_s, what=what, interval_s=1.0)


def _operator_pod(kubectl: Kubectl, timeout_s: float = 300) -> dict[str, Any]:
    """The one Ready operator pod of a 1-replica install, waiting for it when it is (re)starting."""

    def ready() -> list[dict[str, Any]]:
        pods = kubectl.json("get", "pods", "-n", demo.RELEASE_NAMESPACE, "-l", OPERATOR_SELECTOR)["items"]
        return [
            p
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
        ]

    pods = poll(ready, lambda found: len(found) == 1, timeout_s=timeout_s, what="one Ready operator pod")
    return dict(pods[0])


def test_the_operator_runs_in_cluster_on_the_real_node_pinned_non_root_read_only(
    installed: Installed,
) -> None:
    pod = _operator_pod(installed.kubectl)
    digests = json.loads((installed.images / "digests.json").read_text())

    assert pod["spec"]["nodeName"] == "hf-real-0"
    container = pod["spec"]["containers"][0]
    assert container["image"] == digests["hyperframe-operator"]
    assert pod["status"]["containerStatuses"][0]["imageID"].endswith(container["image"].split("@")[1])
    security = {**pod["spec"].get("securityContext", {}), **container.get("securityContext", {})}
    assert security["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True

    tested = demo.helm(installed.cluster.kubeconfig, installed.helm_home, "test", demo.RELEASE,
                       "-n", demo.RELEASE_NAMESPACE, "--timeout", "5m")  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "Phase:          Succeeded" in tested.stdout


def test_a_cpu_job_runs_the_gate_and_trains_in_real_containers_to_succeeded(installed: Installed) -> None:
    kubectl = installed.kubectl
    applied = time.monotonic()
    kubectl.apply([_job(installed, "train", frames=60, every_frames=20)], namespace=NS)

    def running(pods: list[dict[str, Any]]) -> bool:
        return len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods)

    pods = poll(
        lambda: _job_pods(kubectl, "train"), running, timeout_s=600, what="both pods Running", interval_s=1
    )
    pods_running = time.monotonic() - applied
    gate_s = max(_init_seconds(p) for p in pods)
    frames_seen: set[int] = set()

    def finished(status: dict[str, Any]) -> bool:
        if status.get("phase") == "Running":
            frames_seen.add(int(status.get("progress", {}).get("frame", 0)))
        return status.get("phase") in {"Succeeded", "Failed"}

    status = _wait_status(kubectl, "train", finished, "job train to finish")
    total = time.monotonic() - applied
    assert status["phase"] == "Succeeded", status.get("message")

    smoke = status["smokeTest"]
    assert smoke["passed"] is True
    assert smoke["busBandwidthGBps"] > 0
    assert {n["node"] for n in smoke["nodes"]} == {"hf-real-0"}
    assert len(frames_seen - {0}) >= 2, f"progress never moved while Running: {sorted(frames_seen)}"
    assert status["progress"]["frame"] == 60
    # The job's own folder (name and uid) on the volume, holding the newest checkpoint.keep (3).
    uid = kubectl.json("get", "hyperframejob", "train", "-n", NS)["metadata"]["uid"]
    volume = demo.CHECKPOINT_ROOT / NS / "train"
    folders = sorted(p.name for p in volume.iterdir())
    assert f"train-{uid}" in folders and not any(f.startswith("frame-") for f in folders), folders
    snapshots = sorted(p.name for p in (volume / f"train-{uid}").glob("frame-*"))
    assert snapshots == ["frame-000020", "frame-000040", "frame-000060"], snapshots
    # cleanPodPolicy (default Running): nothing of the job keeps running.
    poll(lambda: [p for p in _job_pods(kubectl, "train") if p["status"].get("phase") == "Running"],
         lambda pods: not pods, timeout_s=120, what="no job pod left running")  # fmt: skip
    seconds = 60 / max(total - pods_running, 1e-9)
    print(f"apply -> pods Running {pods_running:.1f}s (image pull included); smoke gate in its init container "
          f"{gate_s:.1f}s; total to Succeeded {total:.1f}s; {seconds:.2f} frames/s after Running; last frame "
          f"{status['progress']['samplesPerSecond']:.0f} samples/s; busbw {smoke['busBandwidthGBps']:.3f} GB/s")  # fmt: skip


def _init_seconds(pod: dict[str, Any]) -> float:
    """How long the pod's smoke-gate init container ran (kubelet timestamps, 1 s resolution)."""
    state = pod["status"]["initContainerStatuses"][0]["state"]["terminated"]
    start, end = (
        datetime.fromisoformat(state[k].replace("Z", "+00:00")) for k in ("startedAt", "finishedAt")
    )
    return (end - start).total_seconds()


def test_a_killed_trainer_restarts_the_gang_which_resumes_from_the_last_checkpoint(
    installed: Installed,
) -> None:
    kubectl = installed.kubectl
    job = _job(installed, "resume", frames=40, every_frames=3)
    job["spec"]["runPolicy"] = {"cleanPodPolicy": "None"}  # keep the pods: their logs are checked
    kubectl.apply([job], namespace=NS)
    _wait_status(
        kubectl, "resume", lambda s: s.get("progress", {}).get("frame", 0) >= 8, "frame 8 of job resume"
    )
    master = next(p for p in _job_pods(kubectl, "resume") if p["metadata"]["name"].endswith("-0"))
    # The trainer's main process is tini's child; killing it makes the container exit non-zero.
    kubectl.run("exec", "-n", NS, master["metadata"]["name"], "-c", MAIN_CONTAINER_NAME, "--",
                "python3", "-c", "import os, signal; os.kill(-1, signal.SIGKILL)", check=False)  # fmt: skip

    status = _wait_status(
        kubectl, "resume", lambda s: s.get("phase") in {"Succeeded", "Failed"}, "job resume to end"
    )
    assert status["phase"] == "Succeeded", status.get("message")
    assert status["restarts"] == 1
    assert status["gangGeneration"] >= 1
    pods = _job_pods(kubectl, "resume")
    newest = max(pods, key=lambda p: int(p["metadata"]["labels"][LABEL_GENERATION]))
    logs = kubectl.run(
        "logs", "-n", NS, newest["metadata"]["name"], "-c", MAIN_CONTAINER_NAME, check=False
    ).stdout
    resumed = [int(m) for m in re.findall(r"resumed from \S+: (\d+) frames done", logs)]
    assert resumed and resumed[0] >= 3, logs[-3000:]


def test_a_gate_that_cannot_pass_fails_the_job_at_the_backoff_limit_excluding_no_node(
    installed: Installed,
) -> None:
    # A job-wide busbw shortfall names no node: hf-real-0, the only node, stays schedulable, the
    # gang is retried there once and the job then fails (it used to sit Pending with hf-real-0 excluded).
    kubectl = installed.kubectl
    job = _job(installed, "gate", runtimeOverrides={"smoke": {"minBusBandwidthGBps": 100000}})
    job["spec"]["runPolicy"] = {"backoffLimit": 1}
    kubectl.apply([job], namespace=NS)

    status = _wait_status(
        kubectl, "gate", lambda s: s.get("phase") == "Failed", "job gate to fail", timeout_s=600
    )
    assert status.get("excludedNodes", []) == []
    assert status["restarts"] == 1
    assert status["smokeTest"]["passed"] is False
    assert "bus bandwidth" in status["message"].lower() or "busbw" in status["message"].lower(), status[
        "message"
    ]


def test_deleting_a_running_job_removes_everything_without_an_operator_error_loop(
    installed: Installed,
) -> None:
    kubectl = installed.kubectl
    kubectl.apply([_job(installed, "doomed", frames=400)], namespace=NS)
    _wait_status(kubectl, "doomed", lambda s: s.get("phase") == "Running", "job doomed to run")
    operator = _operator_pod(kubectl)["metadata"]["name"]
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kubectl.run("delete", "hfj", "doomed", "-n", NS, "--wait=true", "--timeout=120s")

    def leftovers() -> list[str]:
        out = kubectl.run("get", "pods,services,configmaps", "-n", NS, "-l", f"{LABEL_JOB}=doomed",
                          "-o", "name", check=False).stdout  # fmt: skip
        return out.split()

    poll(leftovers, lambda names: not names, timeout_s=180, what="every object of job doomed gone")
    logs = kubectl.run("logs", "-n", demo.RELEASE_NAMESPACE, operator, f"--since-time={since}").stdout
    errors = [
        line for line in logs.splitlines() if "doomed" in line and ("ERROR" in line or "Traceback" in line)
    ]
    assert len(errors) <= 1, errors


def test_restarting_the_operator_mid_run_keeps_the_job_going_without_duplicate_pods(
    installed: Installed,
) -> None:
    kubectl = installed.kubectl
    kubectl.apply([_job(installed, "steady", frames=30, every_frames=10)], namespace=NS)
    _wait_status(
        kubectl, "steady", lambda s: s.get("progress", {}).get("frame", 0) >= 2, "frame 2 of job steady"
    )
    before = {p["metadata"]["uid"] for p in _job_pods(kubectl, "steady")}
    old = _operator_pod(kubectl)["metadata"]["name"]
    kubectl.run("delete", "pod", "-n", demo.RELEASE_NAMESPACE, old, "--wait=false")

    status = _wait_status(
        kubectl, "steady", lambda s: s.get("phase") in {"Succeeded", "Failed"}, "job steady to end"
    )
    assert status["phase"] == "Succeeded", status.get("message")
    assert status["restarts"] == 0
    assert _operator_pod(kubectl)["metadata"]["name"] != old
    after = {p["metadata"]["uid"] for p in _job_pods(kubectl, "steady")}
    assert after <= before, "the operator created job pods again after its restart"


def _operator_pods(kubectl: Kubectl, *selectors: str) -> list[dict[str, Any]]:
    selector = ",".join((OPERATOR_SELECTOR, *selectors))
    pods: list[dict[str, Any]] = kubectl.json("get", "pods", "-n", demo.RELEASE_NAMESPACE, "-l", selector)[
        "items"
    ]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def test_an_upgrade_to_two_replicas_rolls_out_and_progress_reaches_the_leader(installed: Installed) -> None:
    kubectl, cluster = installed.kubectl, installed.cluster
    upgraded = demo.install_operator(
        cluster.kubeconfig, installed.helm_home, installed.images, extra_values={**FLUSH, "replicaCount": 2}
    )
    try:
        # --wait: both replicas Ready, the standby included.
        assert upgraded.returncode == 0, upgraded.stdout + upgraded.stderr
        # The Deployment carries the chart's common labels (the component label is on its pods).
        [deployment] = kubectl.json(
            "get",
            "deployments",
            "-n",
            demo.RELEASE_NAMESPACE,
            "-l",
            "app.kubernetes.io/name=hyperframe-operator",
        )["items"]
        name = deployment["metadata"]["name"]
        start = time.monotonic()
        kubectl.run("rollout", "restart", f"deployment/{name}", "-n", demo.RELEASE_NAMESPACE)
        rolled = kubectl.run(
            "rollout",
            "status",
            f"deployment/{name}",
            "-n",
            demo.RELEASE_NAMESPACE,
            "--timeout=240s",
            check=False,
        )
        rollout_s = time.monotonic() - start
        assert rolled.returncode == 0, rolled.stdout + rolled.stderr
        print(f"rollout restart of 2 replicas completed in {rollout_s:.1f}s")
        leaders = poll(
            lambda: _operator_pods(kubectl, f"{LABEL_OPERATOR_LEADER}=true"),
            lambda found: len(found) == 1,
            timeout_s=120,
            what="exactly one operator pod labelled leader",
            interval_s=1,
        )
        assert len(_operator_pods(kubectl)) == 2
        print(f"leader after the rollout: {leaders[0]['metadata']['name']}")

        kubectl.apply([_job(installed, "after-ha", frames=20, every_frames=10)], namespace=NS)
        frames_seen: set[int] = set()

        def finished(status: dict[str, Any]) -> bool:
            if status.get("phase") == "Running":
                frames_seen.add(int(status.get("progress", {}).get("frame", 0)))
            return status.get("phase") in {"Succeeded", "Failed"}

        status = _wait_status(kubectl, "after-ha", finished, "job after-ha to finish")
        assert status["phase"] == "Succeeded", status.get("message")
        assert frames_seen - {0}, f"no progress reached status while Running: {sorted(frames_seen)}"
        assert status["progress"]["frame"] == 20, status["progress"]
    finally:
        back = demo.install_operator(
            cluster.kubeconfig, installed.helm_home, installed.images, extra_values=FLUSH
        )
        assert back.returncode == 0, back.stdout + back.stderr
