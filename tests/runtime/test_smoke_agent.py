"""The node agent bounds its ranks: a hung or dying device check ends the gate with the rank named.

These run the agent in-process (``run_node``) with probes that misbehave on purpose; the ranks are
real forked processes and the rendezvous is a real TCPStore.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, replace

import pytest
from hyperframe.constants import SmokeExit
from hyperframe_runtime.smoke.config import GateConfig
from hyperframe_runtime.smoke.node import run_node
from hyperframe_runtime.smoke.probe import DeviceOutcome, SkippedProbe

pytestmark = pytest.mark.slow


def _config(**fields: float) -> GateConfig:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    return GateConfig(
        master_addr="127.0.0.1",
        master_port=port,
        nnodes=1,
        node_rank=0,
        nproc_per_node=2,
        node_name="test-node",
        allreduce_sizes=(1 << 12,),
        rendezvous_timeout_s=fields.get("rendezvous", 20.0),
        step_timeout_s=fields.get("step", 2.0),
        total_timeout_s=fields.get("total", 0.0),
    )


@dataclass(frozen=True, slots=True)
class HangsOnDevice1:
    def check(self, local_rank: int, config: GateConfig) -> DeviceOutcome:
        if local_rank == 1:
            time.sleep(600)
        return SkippedProbe().check(local_rank, config)


@dataclass(frozen=True, slots=True)
class DiesOnDevice1:
    def check(self, local_rank: int, config: GateConfig) -> DeviceOutcome:
        if local_rank == 1:
            os._exit(7)
        return SkippedProbe().check(local_rank, config)


def test_hung_device_check_times_out_naming_the_rank() -> None:
    result = run_node(_config(step=2.0), HangsOnDevice1())
    report = result.report
    assert report.exit_code == SmokeExit.TIMEOUT and report.failed_check == "device.hang"
    assert "rank 1 (node 0 test-node, local 1) did not finish devices within 2s" in report.reason
    assert report.suspect_node_ranks == [0]
    assert report.duration_s < 30  # the 2 s step budget plus process start-up, not the 600 s sleep


def test_dead_rank_is_named_with_its_exit_code() -> None:
    report = run_node(_config(), DiesOnDevice1()).report
    assert report.exit_code == SmokeExit.FAIL and report.failed_check == "device.driver"
    assert "rank 1 (node 0 test-node, local 1) exited with code 7 during devices" in report.reason


def test_total_limit_cuts_a_long_rendezvous() -> None:
    # Two nodes expected, one present: the rendezvous (20 s) would outlast the 6 s gate limit.
    config = replace(_config(rendezvous=20.0, step=5.0, total=6.0), nnodes=2)
    report = run_node(config, SkippedProbe()).report
    assert report.exit_code == SmokeExit.TIMEOUT and report.failed_check == "collective.rendezvous"
    assert "at the gate's time limit (6s)" in report.reason
    assert report.missing_ranks == [2, 3] and report.suspect_node_ranks == [1]
    assert report.duration_s < 6 + 5  # the limit, plus stopping the ranks on a loaded machine
