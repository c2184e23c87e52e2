"""The smoke gate end to end on CPU: real node processes, real gloo, jobs rendered by the renderer.

Each test renders an example job, runs ``hyperframe-smoke`` for its nodes as separate processes
(as the pods' init containers would) and checks the exit code, the termination-message report and
the table on stdout.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from gatejobs import example_plan, run_gates
from hyperframe.constants import SmokeExit

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


def test_missing_device_fails_every_node_naming_the_device(tmp_path: Path) -> None:
    runs = run_gates(
        tmp_path,
        example_plan("cpu-2node"),
        env={1: {"HYPERFRAME_SMOKE_SIMULATE_MISSING_DEVICE": "1"}},
    )
    for node, run in runs.items():
        assert run.exit_code == SmokeExit.FAIL, f"node {node}:\n{run.stdout}"
        assert run.report.failed_check == "device.count"
        assert "node 1" in run.report.reason and "device 1 is not visible" in run.report.reason
        assert run.report.suspect_node_ranks == [1]
        assert "device plugin" in run.report.remedy
        bad = [(d.node_rank, d.index) for d in run.report.devices if not d.ok]
        assert bad == [(1, 1)]


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
