"""The node agent: it bounds its ranks, node 0's ranks reach the store over loopback, device
failures reach the report.

These run the agent in-process (``run_node``) with probes that misbehave on purpose; the ranks are
real forked processes and the rendezvous is a real TCPStore.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, replace

import pytest
import torch
from hyperframe.constants import SmokeExit
from hyperframe.smoke_remedies import FAILURES
from hyperframe_runtime.smoke.config import GateConfig
from hyperframe_runtime.smoke.device_checks import GpuProbe
from hyperframe_runtime.smoke.node import run_node
from hyperframe_runtime.smoke.probe import DeviceOutcome, SkippedProbe
from hyperframe_runtime.smoke.table import format_table

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


def test_node_0_ranks_reach_the_store_over_loopback() -> None:
    # MASTER_ADDR is node 0's Service name, which does not resolve before the pod is ready (here:
    # never). Node 0's agent and its rank processes must not need it.
    config = replace(_config(), master_addr="hyperframe-unresolvable.invalid")
    assert config.store_host() == "127.0.0.1"
    report = run_node(config, SkippedProbe()).report
    assert report.ok and report.exit_code == SmokeExit.PASS, report.reason
    assert report.busbw_gbps is not None and report.busbw_gbps > 0
    assert replace(config, nnodes=2, node_rank=1).store_host() == "hyperframe-unresolvable.invalid"


@dataclass(frozen=True)
class AliasedGpu:
    """Fake GPUs on CPU tensors whose memory aliases: the last chunk is the first one again."""

    def availability(self) -> tuple[bool, str]:
        return True, ""

    def count(self) -> int:
        return 2

    def select(self, index: int) -> torch.device:
        # The rank is forked from this pytest process, whose OpenMP pool (from earlier tests) does
        # not survive a fork; the real gate forks before any torch op, so it never meets this.
        torch.set_num_threads(1)
        return torch.device("cpu")

    def describe(self, index: int) -> tuple[str, tuple[str, ...]]:
        return "aliased fake", ()

    def mem_get_info(self, device: torch.device) -> tuple[int, int]:
        return 16 << 20, 16 << 20

    def allocate_chunks(self, device: torch.device, nbytes: int, chunk_bytes: int) -> list[torch.Tensor]:
        chunks = list(torch.split(torch.empty(nbytes, dtype=torch.uint8), chunk_bytes))
        chunks[-1] = chunks[0]
        return chunks

    def matmul(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x @ y

    def copy(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        dst.copy_(src)

    def peer_copy(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        dst.copy_(src)

    def seconds_per_call(self, fn: object, calls: int, device: torch.device) -> float:
        return 1e-6

    def can_access_peer(self, index: int, peer: int) -> bool:
        return True

    def release(self) -> None:
        pass


def test_a_device_failure_in_a_rank_process_reaches_the_report() -> None:
    config = replace(_config(step=30.0), device_checks=frozenset({"memory"}), memory_fraction=0.5)
    result = run_node(config, GpuProbe(AliasedGpu()))
    report = result.report
    assert report.exit_code == SmokeExit.FAIL and report.failed_check == "device.memory-corrupt"
    assert (
        report.reason.startswith("node 0 (test-node) GPU 0: ")
        and "did not read back the pattern" in report.reason
    )
    sent = json.loads(report.to_termination_message())
    assert (
        sent["failed_check"] == "device.memory-corrupt"
        and sent["remedy"] == FAILURES["device.memory-corrupt"].remedy
    )
    assert [d["ok"] for d in sent["devices"]] == [False, False]
    assert (
        f"  remedy: {FAILURES['device.memory-corrupt'].remedy}"
        in format_table(report, result.own).splitlines()
    )
