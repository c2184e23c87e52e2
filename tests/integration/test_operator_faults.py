"""Faults under the operator, against the real control plane with KWOK GPU nodes.

Smoke-gate failures (one bad node, every node bad, a config error), a node going NotReady, a pod
evicted through the Eviction API (a drain), a node drained while the operator was stopped, the
operator killed mid-job, and 20 bad or edge-case objects applied while good jobs run.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from hyperframe.constants import LABEL_JOB, SmokeExit
from hyperframe.smoke_report import SmokeReport
from hyperframe_devcluster.faults import (
    clear_node_faults,
    fail_init_containers_on_node,
    finish_pod,
    set_node_not_ready,
    set_node_ready,
)
from hyperframe_devcluster.kube import Kubectl
from hyperframe_devcluster.sim import gpu_node_name
from operator_harness import (
    REPO,
    OperatorProcess,
    condition,
    gpu_job,
    live_pods,
    operator,
    rank_pod,
    status,
    wait,
    wait_phase,
    wait_running_gang,
)

pytestmark = pytest.mark.cluster
__all__ = ["operator"]

GPU_NODES = [gpu_node_name(i) for i in range(4)]


UNSCHEDULABLE_AFTER_S = 15
OPERATOR_SETTINGS = {"HYPERFRAME_UNSCHEDULABLE_TIMEOUT_SECONDS": str(UNSCHEDULABLE_AFTER_S)}


@functools.cache
def _gate_reports() -> ModuleType:
    """tests/unit/controller/gate_reports.py: termination messages built by the gate's own code."""
    spec = importlib.util.spec_from_file_location(
        "hf_gate_reports", REPO / "tests/unit/controller/gate_reports.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _missing_gpu_report(node: str) -> str:
    """What the real gate of a 1-node gang writes when a GPU of its node is missing."""
    return str(_gate_reports().gate_message(0, node, nnodes=1, bad_node_ranks=(0,)))


def _busbw_report(node: str) -> str:
    """What the real gate writes when the job-wide busbw is below the floor (it blames no node)."""
    return str(_gate_reports().gate_message(0, node, nnodes=2, busbw=12.5, min_busbw=100.0))


def _config_error_report(node: str) -> str:
    report = SmokeReport.failure("config.invalid", f"job.json: bad value on {node}", node=node)
    return report.to_termination_message()


_SPARE_TAINT = "hyperframe.dev/test-spare=true:NoSchedule"


@pytest.fixture
def healthy_nodes(kubectl: Kubectl) -> Iterator[None]:
    """Whatever a test does to the simulated nodes is undone afterwards."""
    yield
    clear_node_faults(kubectl)
    for node in GPU_NODES:
        kubectl.run("uncordon", node, check=False)
        kubectl.run("taint", "node", node, _SPARE_TAINT.split("=")[0] + "-", check=False)
        set_node_ready(kubectl, node)


def test_gate_failure_on_one_node_excludes_it_and_the_gang_succeeds_elsewhere(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str, healthy_nodes: None
) -> None:
    bad, others = GPU_NODES[0], GPU_NODES[1:]
    # The first gang must land on the bad node. A taint (not a cordon) keeps it off the others:
    # the operator counts cordoned nodes out of the pool an exclusion must leave.
    for node in others:
        kubectl.run("taint", "node", node, _SPARE_TAINT)
    fail_init_containers_on_node(kubectl, bad, exit_code=SmokeExit.FAIL, message=_missing_gpu_report(bad))
    kubectl.apply([gpu_job("gatefail", namespace, nodes=1)])
    st = wait(
        operator,
        lambda: status(kubectl, namespace, "gatefail"),
        lambda s: s.get("excludedNodes") == [bad] and s.get("restarts") == 1,
        what=f"{bad} excluded after one restart",
    )
    failed = condition(st, "SmokeTestFailed")
    assert failed["status"] == "True" and bad in failed["message"] and "device.count" in failed["message"]
    entry = next(n for n in st["smokeTest"]["nodes"] if n["node"] == bad)
    assert entry["passed"] is False and entry["reason"] == "device.count"

    for node in others:
        kubectl.run("taint", "node", node, _SPARE_TAINT.split("=")[0] + "-")
    gang = wait_running_gang(operator, kubectl, namespace, "gatefail", nodes=1, generation=1)
    assert bad not in {p["spec"]["nodeName"] for p in gang}, "the excluded node got a pod again"
    finish_pod(kubectl, namespace, rank_pod(gang, 0)["metadata"]["name"], exit_code=0)
    st = wait_phase(operator, kubectl, namespace, "gatefail", "Succeeded")
    assert st["excludedNodes"] == [bad]


def test_a_busbw_shortfall_everywhere_excludes_no_node_and_fails_at_the_backoff_limit(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str, healthy_nodes: None
) -> None:
    for node in GPU_NODES:
        fail_init_containers_on_node(kubectl, node, exit_code=SmokeExit.FAIL, message=_busbw_report(node))
    kubectl.apply([gpu_job("allbad", namespace, nodes=1, backoff_limit=2)])
    st = wait_phase(operator, kubectl, namespace, "allbad", "Failed", timeout_s=90)
    failed = condition(st, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert "backoffLimit (2)" in failed["message"] and "collective.busbw" in failed["message"]
    assert st["restarts"] == 2 and st["excludedNodes"] == []


def test_a_gang_that_cannot_be_scheduled_fails_with_the_schedulers_message(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str, healthy_nodes: None
) -> None:
    # One pod per GPU node and four GPU nodes: the fifth pod of the gang has nowhere to go.
    kubectl.apply([gpu_job("toobig", namespace, nodes=len(GPU_NODES) + 1)])
    st = wait_phase(operator, kubectl, namespace, "toobig", "Failed", timeout_s=UNSCHEDULABLE_AFTER_S + 60)
    cond = condition(st, "Unschedulable")
    assert cond["status"] == "True" and "unschedulable for" in cond["message"]
    assert "nodes are available" in cond["message"], "the scheduler's own message"
    assert condition(st, "Failed")["reason"] == "Unschedulable"
    wait(
        operator,
        lambda: kubectl.json(
            "get", "events", "-n", namespace, "--field-selector", "involvedObject.name=toobig"
        ),
        lambda events: "Unschedulable" in {e["reason"] for e in events["items"]},
        what="an Unschedulable event on the job",
    )


def test_gate_config_error_fails_at_once(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str, healthy_nodes: None
) -> None:
    for node in GPU_NODES:
        message = _config_error_report(node)
        fail_init_containers_on_node(kubectl, node, exit_code=SmokeExit.CONFIG, message=message)
    kubectl.apply([gpu_job("cfgerr", namespace, nodes=1, backoff_limit=3)])
    st = wait_phase(operator, kubectl, namespace, "cfgerr", "Failed")
    assert condition(st, "Failed")["reason"] == "SmokeTestConfigError"
    assert st["restarts"] == 0 and st["excludedNodes"] == []


def test_node_not_ready_under_a_running_gang_recovers(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str, healthy_nodes: None
) -> None:
    kubectl.apply([gpu_job("notready", namespace, nodes=2)])
    gang = wait_running_gang(operator, kubectl, namespace, "notready", nodes=2, generation=0)
    dead = rank_pod(gang, 1)["spec"]["nodeName"]
    set_node_not_ready(kubectl, dead)
    st = wait(
        operator,
        lambda: status(kubectl, namespace, "notready"),
        lambda s: s.get("restarts") == 1,
        what="gang restart after NotReady",
    )
    assert condition(st, "Restarting")["reason"] == "NodeNotReady"
    new = wait_running_gang(operator, kubectl, namespace, "notready", nodes=2, generation=1)
    assert dead not in {p["spec"]["nodeName"] for p in new}
    finish_pod(kubectl, namespace, rank_pod(new, 0)["metadata"]["name"], exit_code=0)
    wait_phase(operator, kubectl, namespace, "notready", "Succeeded")


_HOLD = "hyperframe.dev/test-hold"
"""A finalizer the drain test puts on the pod it evicts: the pod stays Terminating (as a real pod
does for its grace period while the kubelet stops it) until the test has seen the verdict."""


def test_a_pod_evicted_through_the_eviction_api_preempts_the_gang_uncounted(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str
) -> None:
    kubectl.apply([gpu_job("drained", namespace, nodes=2, backoff_limit=0)])
    gang = wait_running_gang(operator, kubectl, namespace, "drained", nodes=2, generation=0)
    victim = rank_pod(gang, 1)
    name, node = victim["metadata"]["name"], victim["spec"]["nodeName"]
    hold = json.dumps({"metadata": {"finalizers": [_HOLD]}})
    kubectl.run("patch", "pod", name, "-n", namespace, "--type=merge", "-p", hold)
    try:
        # What `kubectl drain` does for each pod: a policy/v1 Eviction on pods/eviction.
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"
        kubectl.run("create", "--raw", path, "-f", "-", input=json.dumps(eviction))
        evicted = kubectl.json("get", "pod", name, "-n", namespace)
        targets = [c for c in evicted["status"].get("conditions") or () if c["type"] == "DisruptionTarget"]
        assert [c["reason"] for c in targets] == ["EvictionByEvictionAPI"], targets
        st = wait(
            operator,
            lambda: status(kubectl, namespace, "drained"),
            lambda s: s.get("gangGeneration") == 1,
            what="gang restart after the eviction",
        )
    finally:
        kubectl.run("patch", "pod", name, "-n", namespace, "--type=json", "-p",
                    '[{"op": "remove", "path": "/metadata/finalizers"}]', check=False)  # fmt: skip
    restarting = condition(st, "Restarting")
    assert st["restarts"] == 0, restarting
    assert restarting["reason"] == "Preempted", restarting
    assert "EvictionByEvictionAPI" in restarting["message"] and node in restarting["message"]
    events = kubectl.json("get", "events", "-n", namespace, "--field-selector", "involvedObject.name=drained")
    assert any("preempted" in e["message"] and "not counted" in e["message"] for e in events["items"])
    new = wait_running_gang(operator, kubectl, namespace, "drained", nodes=2, generation=1)
    finish_pod(kubectl, namespace, rank_pod(new, 0)["metadata"]["name"], exit_code=0)
    assert wait_phase(operator, kubectl, namespace, "drained", "Succeeded")["restarts"] == 0


def test_a_pod_drained_while_the_operator_was_stopped_preempts_the_gang_uncounted(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str
) -> None:
    """No watch sees the pod Terminating with its DisruptionTarget, and the pod is gone when the
    operator starts: the gate's record of the rank's node, now cordoned, is what is left."""
    kubectl.apply([gpu_job("drained-away", namespace, nodes=2, backoff_limit=0)])
    gang = wait_running_gang(operator, kubectl, namespace, "drained-away", nodes=2, generation=0)
    victim = rank_pod(gang, 1)
    name, node = victim["metadata"]["name"], victim["spec"]["nodeName"]
    operator.stop(kill=True)
    try:
        # The real `kubectl drain`: cordon, then an Eviction of each pod, waiting until it is gone.
        kubectl.run(
            "drain", node, "--pod-selector", f"{LABEL_JOB}=drained-away", "--ignore-daemonsets",
            "--delete-emptydir-data", "--force", "--timeout=60s",
        )  # fmt: skip
        assert name not in {p["metadata"]["name"] for p in live_pods(kubectl, namespace, "drained-away")}
        operator.start()
        st = wait(
            operator,
            lambda: status(kubectl, namespace, "drained-away"),
            lambda s: s.get("gangGeneration") == 1 or s.get("phase") == "Failed",
            what="gang restart after the drain",
        )
        restarting = condition(st, "Restarting")
        assert st["restarts"] == 0 and restarting.get("reason") == "Preempted", st.get("message")
        assert f"{node} is cordoned" in restarting["message"]
        new = wait_running_gang(operator, kubectl, namespace, "drained-away", nodes=2, generation=1)
        assert node not in {p["spec"]["nodeName"] for p in new}
    finally:
        kubectl.run("uncordon", node, check=False)
        if not operator.alive:
            operator.start()
    finish_pod(kubectl, namespace, rank_pod(new, 0)["metadata"]["name"], exit_code=0)
    assert wait_phase(operator, kubectl, namespace, "drained-away", "Succeeded")["restarts"] == 0


def test_operator_killed_mid_job_resumes_without_duplicates(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str
) -> None:
    kubectl.apply([gpu_job("resume", namespace, nodes=2)])
    gang = wait_running_gang(operator, kubectl, namespace, "resume", nodes=2, generation=0)
    operator.stop(kill=True)
    try:
        # While no operator runs: a worker dies and a new job arrives.
        finish_pod(kubectl, namespace, rank_pod(gang, 1)["metadata"]["name"], exit_code=137)
        kubectl.apply([gpu_job("latecomer", namespace, nodes=1)])
    finally:
        operator.start()
    new = wait_running_gang(operator, kubectl, namespace, "resume", nodes=2, generation=1)
    wait_running_gang(operator, kubectl, namespace, "latecomer", nodes=1, generation=0)
    assert status(kubectl, namespace, "resume")["restarts"] == 1

    # A second restart while everything runs changes nothing: same pods, same status.
    before = {p["metadata"]["uid"] for p in new}
    operator.stop(kill=True)
    operator.start()
    wait(
        operator,
        lambda: operator.metrics(),
        lambda text: "hyperframe_reconcile_duration_seconds_count" in text and "_count 0.0" not in text,
        what="the restarted operator reconciled",
    )
    after = live_pods(kubectl, namespace, "resume")
    assert {p["metadata"]["uid"] for p in after} == before, "pods were duplicated or replaced"
    st = status(kubectl, namespace, "resume")
    assert st["restarts"] == 1 and st["phase"] == "Running" and st["gangGeneration"] == 1


def _bad_objects(namespace: str) -> list[dict[str, Any]]:
    spec = importlib.util.spec_from_file_location(
        "hf_api_test_helpers", REPO / "tests/unit/api/api_helpers.py"
    )
    assert spec is not None and spec.loader is not None
    helpers: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    job, _ = helpers.example_pair("cpu-2node.yaml")
    objects = []
    for case in helpers.bad_jobs():
        if case.get("update"):
            continue
        obj = helpers.patched(job, case.get("job") or {})
        obj["metadata"]["namespace"] = namespace
        if not case["job"].get("metadata", {}).get("name"):
            obj["metadata"]["name"] = f"bad-{case['name']}"[:40].rstrip("-")
        objects.append(obj)
    # Edge cases the schema accepts: a missing runtime, and a gang bigger than the cluster.
    ghost = helpers.patched(
        job, {"metadata": {"name": "bad-no-runtime"}, "spec": {"runtimeRef": {"name": "nope"}}}
    )
    huge = gpu_job("bad-too-big", namespace, nodes=64)
    ghost["metadata"]["namespace"] = namespace
    return [ghost, huge, *objects][:20]


def test_bad_objects_never_block_good_jobs(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str
) -> None:
    docs = yaml.safe_load_all((REPO / "examples/cpu-2node.yaml").read_text())
    cpu_runtime = next(d for d in docs if d and d["kind"] == "HyperFrameRuntime")
    kubectl.apply([cpu_runtime])
    kubectl.apply([gpu_job("good-a", namespace, nodes=1), gpu_job("good-b", namespace, nodes=1)])
    bad = _bad_objects(namespace)
    assert len(bad) == 20
    accepted = []
    for obj in bad:
        result = kubectl.run("apply", "-f", "-", input=json.dumps(obj), check=False)
        if result.returncode == 0:
            accepted.append(obj["metadata"]["name"])
    for name in ("good-a", "good-b"):
        gang = wait_running_gang(operator, kubectl, namespace, name, nodes=1, generation=0)
        finish_pod(kubectl, namespace, rank_pod(gang, 0)["metadata"]["name"], exit_code=0)
    for name in ("good-a", "good-b"):
        wait_phase(operator, kubectl, namespace, name, "Succeeded")
    assert operator.alive
    # Every accepted bad object got a status that says what is wrong.
    for name in accepted:
        st = wait(
            operator,
            functools.partial(status, kubectl, namespace, name),
            lambda s: bool(s.get("phase")),
            what=f"{name} has a phase",
        )
        if st["phase"] == "Failed":
            assert condition(st, "Failed")["reason"] == "InvalidSpec", st
            assert "spec." in st["message"] or "metadata." in st["message"], "the message names the field"
        else:  # waiting for its runtime, or a gang bigger than the cluster waiting for nodes
            assert st["phase"] in ("Pending", "SmokeTesting"), st
    ghost = status(kubectl, namespace, "bad-no-runtime")
    assert "runtimeRef" in ghost.get("message", ""), ghost
    # The oversized gang holds GPU nodes (no gang scheduler here): free them for later tests.
    kubectl.run("delete", "hyperframejob", "bad-too-big", "-n", namespace, "--wait=true", "--timeout=60s")
    wait(
        operator,
        lambda: live_pods(kubectl, namespace, "bad-too-big"),
        lambda ps: not ps,
        what="big gang gone",
    )


def test_two_active_replicas_never_duplicate_pods_or_restarts(
    operator: OperatorProcess, kubectl: Kubectl, kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    """Worst case for HA: leader election off, both replicas act. State in status + labels keeps them consistent."""
    second = OperatorProcess(kubeconfig, tmp_path / "second.log")
    second.start()
    try:
        kubectl.apply([gpu_job("twin", namespace, nodes=2)])
        gang = wait_running_gang(operator, kubectl, namespace, "twin", nodes=2, generation=0)
        finish_pod(kubectl, namespace, rank_pod(gang, 1)["metadata"]["name"], exit_code=1)
        new = wait_running_gang(operator, kubectl, namespace, "twin", nodes=2, generation=1)
        st = status(kubectl, namespace, "twin")
        assert st["restarts"] == 1 and st["gangGeneration"] == 1, "both replicas restarted the gang"
        assert len({p["metadata"]["name"] for p in new}) == 2
        finish_pod(kubectl, namespace, rank_pod(new, 0)["metadata"]["name"], exit_code=0)
        wait_phase(operator, kubectl, namespace, "twin", "Succeeded")
        assert status(kubectl, namespace, "twin")["restarts"] == 1
    finally:
        second.stop()
