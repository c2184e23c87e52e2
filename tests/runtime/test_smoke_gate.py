"""The smoke gate end to end on CPU: real node processes, real gloo, jobs rendered by the renderer.

Each test renders an example job, runs ``hyperframe-smoke`` for its nodes as separate processes
(as the pods' init containers would) and checks the exit code, the termination-message report and
the table on stdout.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from gatejobs import GateRun, example_plan, run_gates
from hyperframe.constants import SmokeExit
from hyperframe.controller.facts import JobFacts, PolicySettings, RunPolicy
from hyperframe.controller.observed import ContainerEnd, NodeState, ObservedPod
from hyperframe.controller.state_machine import reconcile
from hyperframe.controller.status import JobStatus, Phase
from hyperframe.smoke_report import Fault

pytestmark = pytest.mark.slow


def _smoke(**fields: Any) -> Any:
    def edit(job: dict[str, Any], runtime: dict[str, Any]) -> None:
        runtime["spec"]["smoke"].update(fields)

    return edit


def test_two_ranks_pass_and_report_busbw(tmp_path: Path) -> None:
    runs = run_gates(tmp_path, example_plan("cpu-tiny"))
    run = runs[0]
    assert run.exit_code == SmokeExit.PASS, run.stdout
    assert run.report.ok and run.report.world_size == 2
    assert run.report.busbw_gbps is not None and run.report.busbw_gbps > 0
    assert [(d.node_rank, d.index, d.name) for d in run.report.devices] == [(0, 0, "cpu"), (0, 1, "cpu")]
    assert "PASS" in run.stdout and "busbw" in run.stdout and "device checks skipped: CPU job" in run.stdout


def test_four_ranks_on_two_nodes_pass(tmp_path: Path) -> None:
    runs = run_gates(tmp_path, example_plan("cpu-2node"))
    for node, run in runs.items():
        assert run.exit_code == SmokeExit.PASS, f"node {node}:\n{run.stdout}"
        assert run.report.world_size == 4 and run.report.node_rank == node
        assert {(d.node_rank, d.index) for d in run.report.devices} == {
            (n, i) for n in (0, 1) for i in (0, 1)
        }
        assert run.report.busbw_gbps is not None and run.report.busbw_gbps > 0
        # busbw = algbw x 2(n-1)/n with n = 4 ranks
        assert run.report.algbw_gbps is not None
        assert run.report.busbw_gbps == pytest.approx(run.report.algbw_gbps * 1.5, rel=0.02)


# Node rank 1's device 1 is missing: only node 1's gate processes get the simulation hook, which
# the CPU path of the device check reads. The nodes' NODE_NAME is what the downward API gives a pod.
_T0 = datetime(2026, 1, 1, tzinfo=UTC)
_NODE_NAMES = {0: "gpu-a", 1: "gpu-b"}
_ONE_BAD_DEVICE = {
    0: {"NODE_NAME": _NODE_NAMES[0]},
    1: {"NODE_NAME": _NODE_NAMES[1], "HYPERFRAME_SMOKE_SIMULATE_MISSING_DEVICE": "1"},
}


def test_missing_device_fails_every_node_but_only_its_node_is_blamed(tmp_path: Path) -> None:
    runs = run_gates(tmp_path, example_plan("cpu-2node"), env=_ONE_BAD_DEVICE)
    for node, run in runs.items():
        assert run.exit_code == SmokeExit.FAIL, f"node {node}:\n{run.stdout}"
        assert run.report.failed_check == "device.count"
        assert "node 1" in run.report.reason and "device 1 is not visible" in run.report.reason
        assert run.report.suspect_node_ranks == [1]
        assert "device plugin" in run.report.remedy
        bad = [(d.node_rank, d.index) for d in run.report.devices if not d.ok]
        assert bad == [(1, 1)]
    # Only the node with the missing device names itself at fault; the other blames node 1.
    assert runs[1].report.fault == Fault.OWN and runs[1].report.node == "gpu-b"
    assert runs[0].report.fault == Fault.OTHER and runs[0].report.node == "gpu-a"

    # The operator, fed both termination messages, excludes only the node the gate blames.
    pods = [_gate_ended(rank, _NODE_NAMES[rank], run) for rank, run in sorted(runs.items())]
    nodes = {n: NodeState(name=n, ready=True, since=_T0) for n in ("gpu-a", "gpu-b", "gpu-c")}
    facts = JobFacts(namespace="ns", name="j", generation=1, num_nodes=2, run_policy=RunPolicy())
    status = JobStatus(phase=Phase.SMOKE_TESTING, start_time=_T0)
    plan = reconcile(facts, status, pods, nodes, _T0, PolicySettings())
    assert plan.status.excluded_nodes == ("gpu-b",), [e.message for e in plan.events]
    assert plan.status.phase == Phase.RESTARTING and plan.status.restarts == 1


def _gate_ended(rank: int, node: str, run: GateRun) -> ObservedPod:
    """The pod of ``rank`` as the operator observes it once its gate container exited."""
    message = run.log.read_text() if run.log.exists() else ""
    return ObservedPod(
        name=f"j-g0-{rank}",
        job="j",
        rank=rank,
        generation=0,
        phase="Failed",
        node=node,
        deleting_since=None,
        gate_started=True,
        gate_end=ContainerEnd(exit_code=run.exit_code, reason="Error", message=message),
        main_started=False,
        main_end=None,
    )


def test_rank_that_never_arrives_times_out_naming_it(tmp_path: Path) -> None:
    local = example_plan("cpu-2node", _smoke(timeoutSeconds=10))
    runs = run_gates(tmp_path, local, nodes=[0])  # node 1's pod never starts
    run = runs[0]
    assert run.exit_code == SmokeExit.TIMEOUT, run.stdout
    assert run.report.failed_check == "collective.rendezvous"
    assert run.report.missing_ranks == [2, 3] and run.report.suspect_node_ranks == [1]
    assert "rank(s) 2-3 on node(s) 1 did not arrive" in run.report.reason
    # Bounded by the runtime's smoke.timeoutSeconds (10 s); run_gates would raise on a hang.
    assert run.report.duration_s <= 10


def test_impossible_busbw_threshold_fails_with_the_measured_figure(tmp_path: Path) -> None:
    runs = run_gates(tmp_path, example_plan("cpu-tiny", _smoke(minBusBandwidthGBps=100000)))
    run = runs[0]
    assert run.exit_code == SmokeExit.FAIL, run.stdout
    assert run.report.failed_check == "collective.busbw"
    assert run.report.busbw_gbps is not None and run.report.busbw_gbps > 0
    measured = re.search(r"all-reduce busbw ([0-9.e+-]+) GB/s", run.report.reason)
    assert measured is not None, run.report.reason
    assert float(measured[1]) == pytest.approx(run.report.busbw_gbps, rel=0.05, abs=0.01)
    assert "< minimum 100000 GB/s" in run.report.reason
