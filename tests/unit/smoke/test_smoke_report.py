"""The termination-message contract: size bound, graceful compaction and forgiving parsing."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hyperframe.constants import TERMINATION_MESSAGE_MAX_BYTES, SmokeExit
from hyperframe.smoke_remedies import FAILURES
from hyperframe.smoke_report import DeviceFigures, Fault, SmokeReport


def _job_devices(nodes: int, gpus: int, *, bad: tuple[int, int] | None = None) -> list[DeviceFigures]:
    return [
        DeviceFigures(
            index=g,
            name="NVIDIA H100 80GB HBM3",
            tflops=712.345678 - g,
            mem_bw_gbps=2950.123 + n,
            ok=(n, g) != bad,
            node_rank=n,
        )
        for n in range(nodes)
        for g in range(gpus)
    ]


def _size(text: str) -> int:
    return len(text.encode())


def test_small_report_roundtrips_exactly() -> None:
    report = SmokeReport(
        ok=True,
        exit_code=0,
        node="gpu-node-1",
        node_rank=0,
        busbw_gbps=181.3,
        algbw_gbps=96.67,
        world_size=16,
        duration_s=7.5,
        devices=_job_devices(2, 8),
    )
    text = report.to_termination_message()
    back = SmokeReport.from_termination_message(text)
    assert back.devices == [
        DeviceFigures(
            index=d.index,
            name=d.name,
            tflops=float(f"{d.tflops:.4g}"),
            mem_bw_gbps=float(f"{d.mem_bw_gbps:.4g}"),
            ok=d.ok,
            node_rank=d.node_rank,
        )
        for d in report.devices
    ]
    assert back.ok and back.exit_code == 0 and back.busbw_gbps == 181.3 and back.device_summary is None
    assert " " not in text.split('"name"')[0], "message must be compact JSON"


def test_8_gpus_x_64_nodes_fits_and_keeps_failures_and_own_node() -> None:
    report = SmokeReport.failure(
        "device.matmul",
        "node 17 GPU 5: matmul result wrong (max abs error 3.2e+01)",
        node="gpu-node-017.example.internal",
        node_rank=3,
        world_size=512,
        duration_s=12.0,
        devices=_job_devices(64, 8, bad=(17, 5)),
        suspect_node_ranks=[17],
    )
    text = report.to_termination_message()
    assert _size(text) <= TERMINATION_MESSAGE_MAX_BYTES
    back = SmokeReport.from_termination_message(text)
    assert back.failed_check == "device.matmul" and back.exit_code == SmokeExit.FAIL
    assert back.suspect_node_ranks == [17]
    kept = {(d.node_rank, d.index) for d in back.devices}
    assert (17, 5) in kept, "the failing device must survive compaction"
    assert {(3, g) for g in range(8)} <= kept, "this node's devices must survive compaction"
    assert back.device_summary is not None
    assert back.device_summary.count == 512 and back.device_summary.failed == 1
    assert back.devices_omitted == 512 - len(back.devices)
    assert back.device_summary.tflops_min == pytest.approx(705.3, abs=0.01)


def test_everything_failing_and_huge_texts_still_fit() -> None:
    devices = [DeviceFigures(index=i % 8, name="x" * 200, ok=False, node_rank=i // 8) for i in range(512)]
    report = SmokeReport.failure(
        "collective.rendezvous",
        "ranks never arrived: " + ", ".join(str(r) for r in range(2000)),
        node="n" * 300,
        devices=devices,
        missing_ranks=list(range(2000)),
        suspect_node_ranks=list(range(250)),
    )
    text = report.to_termination_message()
    assert _size(text) <= TERMINATION_MESSAGE_MAX_BYTES
    back = SmokeReport.from_termination_message(text)
    assert back.exit_code == SmokeExit.TIMEOUT and not back.ok
    assert back.missing_ranks[:3] == [0, 1, 2]
    assert back.device_summary is not None and back.device_summary.failed == 512


def test_multibyte_text_counts_bytes_not_characters() -> None:
    report = SmokeReport.failure("internal.error", "错误" * 3000, node="节点" * 100)
    text = report.to_termination_message()
    assert _size(text) <= TERMINATION_MESSAGE_MAX_BYTES
    assert SmokeReport.from_termination_message(text).failed_check == "internal.error"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("Error: exec format error", "not valid JSON"),
        ('{"version":1,"ok":false,"exit_code":1,"node":"a","reason":"dev', "not valid JSON"),
        ("[1,2]", "not an object"),
    ],
)
def test_garbage_gives_unreadable_report_never_raises(text: str, fragment: str) -> None:
    back = SmokeReport.from_termination_message(text, exit_code=3)
    assert not back.ok
    assert back.exit_code == 3, "the container's exit code is kept when the message carries none"
    assert back.failed_check == "report.unreadable"
    assert fragment in back.reason
    assert back.remedy == FAILURES["report.unreadable"].remedy


def test_wrong_types_are_dropped_and_named() -> None:
    text = json.dumps(
        {
            "ok": "yes",
            "exit_code": 1,
            "node": 5,
            "busbw_gbps": "fast",
            "devices": [{"index": 0, "tflops": "x"}, 7],
            "future_field": 1,
        }
    )
    back = SmokeReport.from_termination_message(text)
    assert not back.ok and back.exit_code == 1 and back.node == "" and back.busbw_gbps is None
    assert [d.index for d in back.devices] == [0]
    for name in ("ok", "node", "busbw_gbps", "devices[0].tflops", "devices[1]"):
        assert name in back.reason


def test_ok_with_nonzero_exit_is_not_trusted() -> None:
    back = SmokeReport.from_termination_message('{"ok":true,"exit_code":1,"node":"a"}')
    assert not back.ok and "exit_code is 1" in back.reason


def test_missing_remedy_is_filled_from_the_table() -> None:
    back = SmokeReport.from_termination_message(
        '{"ok":false,"exit_code":1,"node":"a","failed_check":"node.shm"}'
    )
    assert back.remedy == FAILURES["node.shm"].remedy


def test_every_reason_has_a_remedy_and_a_valid_exit_code() -> None:
    for reason_id, entry in FAILURES.items():
        assert entry.id == reason_id
        assert entry.remedy.strip() and "\n" not in entry.remedy
        assert entry.exit_code in (SmokeExit.FAIL, SmokeExit.CONFIG, SmokeExit.TIMEOUT)


def test_fault_roundtrips_and_an_unknown_value_is_dropped_and_named() -> None:
    report = SmokeReport.failure(
        "device.count", "node 1 GPU 0 not visible", node="a", node_rank=0, suspect_node_ranks=[1]
    )
    back = SmokeReport.from_termination_message(replace(report, fault=Fault.OTHER).to_termination_message())
    assert back.fault == Fault.OTHER and back.suspect_node_ranks == [1]
    assert '"fault"' not in report.to_termination_message(), "no fault, no key"
    odd = SmokeReport.from_termination_message('{"ok":false,"exit_code":1,"node":"a","fault":"mine"}')
    assert (
        odd.fault is None
        and 'fault: unknown value string "mine": use one of own, other, unattributed' in odd.reason
    )
