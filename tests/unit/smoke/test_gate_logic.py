"""Pure parts of the gate: busbw, naming of ranks, which failure wins, host checks, the table,
and the exit code, JSON report and remedy line of a failing host check or busbw threshold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hyperframe.constants import SmokeExit
from hyperframe.smoke_remedies import FAILURES
from hyperframe.smoke_report import DeviceFigures, Fault, SmokeReport
from hyperframe_runtime.smoke.collective import bus_bandwidth
from hyperframe_runtime.smoke.config import GateConfig, GateConfigError
from hyperframe_runtime.smoke.host_checks import check_host, ib_devices, mounted_shm_bytes
from hyperframe_runtime.smoke.outcome import AllReduceFigure, Failure, RankRecord, rank_ranges
from hyperframe_runtime.smoke.summary import build_report
from hyperframe_runtime.smoke.table import format_table


def _config(**fields: object) -> GateConfig:
    base: dict[str, object] = {
        "master_addr": "127.0.0.1",
        "master_port": 29500,
        "nnodes": 2,
        "node_rank": 0,
        "nproc_per_node": 2,
        "node_name": "node-a",
    }
    base.update(fields)
    return GateConfig(**base)  # type: ignore[arg-type]


def _record(rank: int, *, failure: Failure | None = None, busbw: float | None = None) -> RankRecord:
    figures = ()
    if busbw is not None:
        figures = (
            AllReduceFigure(size_bytes=1 << 20, seconds=0.01, algbw_gbps=busbw / 1.5, busbw_gbps=busbw),
        )
    return RankRecord(
        rank=rank,
        node_rank=rank // 2,
        node=f"node-{rank // 2}",
        device=DeviceFigures(index=rank % 2, name="cpu", ok=failure is None, node_rank=rank // 2),
        failure=failure,
        allreduce=figures,
    )


@pytest.mark.parametrize(("n", "factor"), [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75), (512, 2 * 511 / 512)])
def test_busbw_is_nccl_tests_definition(n: int, factor: float) -> None:
    assert bus_bandwidth(10.0, n) == pytest.approx(10.0 * factor)


def test_rank_ranges_names_many_ranks_briefly() -> None:
    assert rank_ranges([5, 0, 1, 2, 7, 8]) == "0-2, 5, 7-8"
    assert rank_ranges([3]) == "3"
    assert rank_ranges([]) == "none"


def test_pass_report_carries_job_devices_and_busbw() -> None:
    own = [_record(0, busbw=3.0), _record(1, busbw=3.0)]
    job = [*own, _record(2), _record(3)]
    report = build_report(_config(), own=own, job=job, agent_failure=None, duration_s=1.5)
    assert report.ok and report.exit_code == SmokeExit.PASS
    assert report.busbw_gbps == 3.0 and report.algbw_gbps == pytest.approx(2.0)
    assert [(d.node_rank, d.index) for d in report.devices] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_a_device_failure_elsewhere_beats_this_nodes_collective_failure() -> None:
    device = Failure(
        reason_id="device.count", message="node 1 device 1 is not visible", suspect_node_ranks=(1,)
    )
    own = [_record(0, failure=Failure(reason_id="collective.timeout", message="all-reduce hung"))]
    report = build_report(
        _config(), own=own, job=[*own, _record(3, failure=device)], agent_failure=None, duration_s=1
    )
    assert report.failed_check == "device.count" and report.suspect_node_ranks == [1]
    assert report.exit_code == SmokeExit.FAIL


def _missing_gpu(node_rank: int) -> Failure:
    return Failure(
        reason_id="device.count",
        message=f"node {node_rank} GPU 0 is not visible",
        suspect_node_ranks=(node_rank,),
    )


def test_only_the_node_with_the_failed_device_names_itself_at_fault() -> None:
    bad = [_record(2, failure=_missing_gpu(1)), _record(3)]
    healthy = [_record(0), _record(1)]
    job = [*healthy, *bad]
    mine = build_report(_config(node_rank=1), own=bad, job=job, agent_failure=None, duration_s=1)
    theirs = build_report(_config(node_rank=0), own=healthy, job=job, agent_failure=None, duration_s=1)
    for report in (mine, theirs):
        assert report.exit_code == SmokeExit.FAIL and report.failed_check == "device.count"
        assert report.suspect_node_ranks == [1]
    assert mine.fault == Fault.OWN and theirs.fault == Fault.OTHER


def test_a_node_reports_its_own_device_failure_and_names_every_bad_node() -> None:
    job = [_record(0, failure=_missing_gpu(0)), _record(1), _record(2), _record(3, failure=_missing_gpu(1))]
    config = _config(node_rank=1)
    report = build_report(config, own=job[2:], job=job, agent_failure=None, duration_s=1)
    assert report.reason == "node 1 GPU 0 is not visible", "its own failure, not node 0's"
    assert report.suspect_node_ranks == [0, 1] and report.fault == Fault.OWN


def test_a_busbw_shortfall_blames_no_node() -> None:
    own = [_record(0, busbw=3.0), _record(1, busbw=3.0)]
    report = build_report(_config(min_busbw_gbps=4.0), own=own, job=own, agent_failure=None, duration_s=1)
    assert report.failed_check == "collective.busbw" and report.exit_code == SmokeExit.FAIL
    assert report.suspect_node_ranks == [] and report.fault == Fault.UNATTRIBUTED
    assert "names no node" in report.reason


def test_missing_ranks_beat_everything_but_the_agent() -> None:
    rendezvous = Failure(
        reason_id="collective.rendezvous",
        message="2-3 missing",
        missing_ranks=(2, 3),
        suspect_node_ranks=(1,),
    )
    own = [_record(0, failure=rendezvous)]
    report = build_report(_config(), own=own, job=own, agent_failure=None, duration_s=1)
    assert report.exit_code == SmokeExit.TIMEOUT and report.missing_ranks == [2, 3]
    hung = Failure(reason_id="device.hang", message="rank 1 stuck in devices")
    report = build_report(_config(), own=own, job=own, agent_failure=hung, duration_s=1)
    assert report.failed_check == "device.hang" and report.exit_code == SmokeExit.TIMEOUT


def test_busbw_threshold_only_when_set_and_multi_rank() -> None:
    own = [_record(0, busbw=3.0)]
    assert build_report(_config(min_busbw_gbps=2.0), own=own, job=own, agent_failure=None, duration_s=1).ok
    low = build_report(_config(min_busbw_gbps=4.0), own=own, job=own, agent_failure=None, duration_s=1)
    assert (
        low.failed_check == "collective.busbw"
        and "busbw 3 GB/s" in low.reason
        and "< minimum 4 GB/s" in low.reason
    )
    single = _config(nnodes=1, nproc_per_node=1, min_busbw_gbps=4.0)
    assert build_report(single, own=own, job=own, agent_failure=None, duration_s=1).ok


GIB = 1 << 30


def _no_shm() -> int:
    raise FileNotFoundError(2, "No such file or directory", "/dev/shm")


def test_shm_check_compares_the_mount_with_the_configured_size() -> None:
    configured = _config(shm_bytes=16 * GIB)
    assert check_host(configured, shm=lambda: 16 * GIB) is None
    assert check_host(configured, shm=lambda: 32 * GIB) is None
    small = check_host(configured, shm=lambda: 64 << 20)  # the container default: no emptyDir
    assert small is not None and small.reason_id == "node.shm" and small.suspect_node_ranks == (0,)
    assert "/dev/shm is 64 MiB, smaller than the 16.00 GiB the pod is configured with" in small.message
    assert "node 0 (node-a)" in small.message and "raise the runtime's shm size" in small.message
    assert check_host(_config(shm_bytes=16 * GIB), shm=lambda: 16 * GIB - 4096) is not None
    missing = check_host(configured, shm=_no_shm)
    assert (
        missing is not None and missing.reason_id == "node.shm" and "cannot stat /dev/shm" in missing.message
    )


def test_shm_floor_applies_even_when_the_configured_size_is_below_it() -> None:
    floor = _config(shm_bytes=128 << 20, min_shm_bytes=256 << 20)
    failure = check_host(floor, shm=lambda: 128 << 20)
    assert failure is not None and failure.reason_id == "node.shm"
    assert "under the 256 MiB floor NCCL needs for 2 ranks per node" in failure.message
    assert check_host(floor, shm=lambda: 256 << 20) is None


def test_shm_is_not_probed_when_nothing_is_configured() -> None:
    assert check_host(_config(), shm=_no_shm, rdma=lambda: []) is None


def test_rdma_devices_are_required_only_when_rdma_is_enabled() -> None:
    def no_probe() -> list[str]:
        raise AssertionError("the RDMA probe must not run when RDMA is off")

    assert check_host(_config(), rdma=no_probe, shm=_no_shm) is None
    rdma = _config(require_rdma=True, rdma_resource_name="rdma/ib")
    failure = check_host(rdma, rdma=lambda: [])
    assert failure is not None and failure.reason_id == "node.rdma" and failure.suspect_node_ranks == (0,)
    assert "no InfiniBand/RDMA device under /sys/class/infiniband" in failure.message
    assert "requests RDMA (rdma/ib)" in failure.message
    assert check_host(rdma, rdma=lambda: ["mlx5_0"]) is None


def test_the_real_probes_read_the_filesystem(tmp_path: Path) -> None:
    assert mounted_shm_bytes(tmp_path) > 0
    assert ib_devices(tmp_path / "none") == []
    (tmp_path / "mlx5_1").mkdir()
    (tmp_path / "mlx5_0").mkdir()
    assert ib_devices(tmp_path) == ["mlx5_0", "mlx5_1"]


def test_config_rejects_nonsense_with_the_field_named() -> None:
    with pytest.raises(GateConfigError, match=r"NODE_RANK: 2 is outside 0\.\.1"):
        _config(node_rank=2)
    with pytest.raises(GateConfigError, match="backend"):
        _config(backend="nccl")  # nccl on a cpu gate
    with pytest.raises(GateConfigError, match="memoryFraction"):
        _config(memory_fraction=1.5)


@pytest.mark.parametrize(
    ("fields", "reason", "line"),
    [
        ({"master_addr": ""}, "config.missing-env", "MASTER_ADDR: must not be shorter than 1 characters: "),
        ({"master_port": 0}, "config.missing-env", "MASTER_PORT: 0 is below the minimum 1: use a value >= 1"),
        (
            {"nproc_per_node": 0},
            "config.world-size",
            "NPROC_PER_NODE: 0 is below the minimum 1: use a value >= 1",
        ),
        (
            {"node_rank": 2},
            "config.world-size",
            "NODE_RANK: 2 is outside 0..1 (PET_NNODES=2 nodes): the pods are numbered from 0 to PET_NNODES - 1",
        ),
        ({"device": "tpu"}, "config.invalid", 'device: unknown value string "tpu": use one of cpu, cuda'),
        (
            {"backend": "mpi"},
            "config.invalid",
            'backend: unknown value string "mpi": use one of "", gloo, nccl',
        ),
        (
            {"backend": "nccl"},
            "config.invalid",
            "backend: 'nccl' needs device 'cuda': use 'gloo' (or '') with device 'cpu'",
        ),
        (
            {"memory_fraction": 1.0},
            "config.invalid",
            "memoryFraction: 1 is not below the maximum 1: use a value < 1",
        ),
        (
            {"allreduce_sizes": ()},
            "config.invalid",
            "allreduceSizes: has 0 items, fewer than 1: give at least 1",
        ),
        (
            {"allreduce_sizes": (1024, 2)},
            "config.invalid",
            "allreduceSizes[1]: 2 is below the minimum 4: use a value >= 4",
        ),
        (
            {"step_timeout_s": 0},
            "config.invalid",
            "stepTimeoutS: 0 is not above the minimum 0: use a value > 0",
        ),
        (
            {"min_busbw_gbps": -1},
            "config.invalid",
            "minBusBandwidthGBps: -1 is below the minimum 0: use a value >= 0",
        ),
        (
            {"checks": frozenset({"devices", "disks"})},
            "config.invalid",
            'checks[1]: unknown value string "disks": use one of devices, collective',
        ),
    ],
)
def test_a_bad_gate_config_names_the_field_problem_and_fix(
    fields: dict[str, object], reason: str, line: str
) -> None:
    with pytest.raises(GateConfigError) as caught:
        _config(**fields)
    assert caught.value.reason_id == reason
    assert str(caught.value).startswith(line)


def test_a_bad_gate_config_reports_every_field_at_once() -> None:
    with pytest.raises(GateConfigError) as caught:
        _config(master_port=70000, iterations=0, shm_bytes=-1)
    assert caught.value.reason_id == "config.missing-env"  # the first field's reason
    assert str(caught.value).splitlines() == [
        "MASTER_PORT: 70000 is above the maximum 65535: use a value <= 65535",
        "shmSizeBytes: -1 is below the minimum 0: use a value >= 0",
        "iterations: 0 is below the minimum 1: use a value >= 1",
    ]


def test_table_shows_verdict_reason_and_remedy() -> None:
    failure = Failure(reason_id="node.shm", message="node 0: /dev/shm is 0.06 GiB")
    own = [_record(0, failure=failure)]
    text = format_table(build_report(_config(), own=own, job=own, agent_failure=None, duration_s=2), own)
    assert "FAIL (exit 1) [node.shm]" in text and "/dev/shm is 0.06 GiB" in text and "shmSize" in text


def _report_says(report: SmokeReport, own: list[RankRecord], reason_id: str, fragment: str) -> None:
    sent = json.loads(report.to_termination_message())
    assert sent["exit_code"] == int(FAILURES[reason_id].exit_code) == report.exit_code
    assert sent["failed_check"] == reason_id and fragment in sent["reason"]
    assert sent["remedy"] == FAILURES[reason_id].remedy
    assert f"  remedy: {FAILURES[reason_id].remedy}" in format_table(report, own).splitlines()


@pytest.mark.parametrize(
    ("config", "shm", "rdma", "reason_id", "fragment"),
    [
        ({"shm_bytes": 16 * GIB}, 64 << 20, ["mlx5_0"], "node.shm", "/dev/shm is 64 MiB"),
        ({"require_rdma": True}, 16 * GIB, [], "node.rdma", "no InfiniBand/RDMA device"),
    ],
)
def test_a_failing_host_check_gives_exit_code_json_and_remedy(
    config: dict[str, object], shm: int, rdma: list[str], reason_id: str, fragment: str
) -> None:
    failure = check_host(_config(**config), shm=lambda: shm, rdma=lambda: rdma)
    assert failure is not None
    own = [_record(0, failure=failure)]
    report = build_report(_config(**config), own=own, job=own, agent_failure=None, duration_s=1)
    assert report.exit_code == SmokeExit.FAIL
    _report_says(report, own, reason_id, fragment)


def test_busbw_below_the_minimum_gives_exit_code_json_and_remedy() -> None:
    own = [_record(0, busbw=3.0)]
    report = build_report(_config(min_busbw_gbps=4.0), own=own, job=own, agent_failure=None, duration_s=1)
    assert report.exit_code == SmokeExit.FAIL
    _report_says(report, own, "collective.busbw", "< minimum 4 GB/s")
