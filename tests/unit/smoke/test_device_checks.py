"""Every device check can fail: a fake GPU with one fault per check, through to exit code, JSON and remedy.

``CpuGpu`` is a healthy fake on CPU tensors; each subclass breaks one thing the way a bad GPU
would (aliased memory, a wrong matmul, slow copies, a corrupting peer link, ...). Each case runs
the real check logic (:func:`check_device`), then the real report path (``build_report``, the
termination-message JSON, the log table) and asserts the exit code, the JSON report and the
remedy line the user sees.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pytest
import torch
from hyperframe.constants import SmokeExit
from hyperframe.smoke_remedies import FAILURES
from hyperframe_runtime.smoke.config import GateConfig, GateConfigError
from hyperframe_runtime.smoke.device_checks import Gpu, check_device, chunk_patterns
from hyperframe_runtime.smoke.outcome import RankRecord
from hyperframe_runtime.smoke.summary import build_report
from hyperframe_runtime.smoke.table import format_table

MIB = 1 << 20


@dataclass(frozen=True)
class CpuGpu:
    """A healthy node of ``gpus`` fake GPUs on CPU tensors: 16 MiB each, 1 microsecond per op."""

    gpus: int = 2

    def availability(self) -> tuple[bool, str]:
        return True, ""

    def count(self) -> int:
        return self.gpus

    def select(self, index: int) -> torch.device:
        return torch.device("cpu")

    def describe(self, index: int) -> tuple[str, tuple[str, ...]]:
        return f"fake GPU {index}", ("fake driver",)

    def mem_get_info(self, device: torch.device) -> tuple[int, int]:
        return 16 * MIB, 16 * MIB

    def allocate_chunks(self, device: torch.device, nbytes: int, chunk_bytes: int) -> Sequence[torch.Tensor]:
        return torch.split(torch.empty(nbytes, dtype=torch.uint8), chunk_bytes)

    def matmul(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x @ y

    def copy(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        dst.copy_(src)

    def peer_copy(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        dst.copy_(src)

    def seconds_per_call(self, fn: Callable[[], object], calls: int, device: torch.device) -> float:
        for _ in range(calls):
            fn()
        return 1e-6

    def can_access_peer(self, index: int, peer: int) -> bool:
        return True

    def release(self) -> None:
        pass


class NoDriver(CpuGpu):
    def availability(self) -> tuple[bool, str]:
        return False, "Found no NVIDIA driver on your system"


class NoCuda(CpuGpu):
    def availability(self) -> tuple[bool, str]:
        return False, "torch.cuda.is_available() is False"


class WrongFp32Matmul(CpuGpu):
    def matmul(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x @ y) * 1.1  # 10 % off


class CorruptBf16Product(CpuGpu):
    def matmul(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = x @ y
        if out.dtype == torch.bfloat16:
            out[: out.shape[0] // 2] = 0
        return out


class Slow(CpuGpu):
    def seconds_per_call(self, fn: Callable[[], object], calls: int, device: torch.device) -> float:
        super().seconds_per_call(fn, calls, device)
        return 1.0


class LittleFreeMemory(CpuGpu):
    def mem_get_info(self, device: torch.device) -> tuple[int, int]:
        return 2 * MIB, 16 * MIB


class AliasedMemory(CpuGpu):
    """The last chunk's addresses decode to the first chunk's cells."""

    def allocate_chunks(self, device: torch.device, nbytes: int, chunk_bytes: int) -> Sequence[torch.Tensor]:
        chunks = list(super().allocate_chunks(device, nbytes, chunk_bytes))
        if len(chunks) > 1:
            chunks[-1] = chunks[0]
        return chunks


class OutOfMemory(CpuGpu):
    def allocate_chunks(self, device: torch.device, nbytes: int, chunk_bytes: int) -> Sequence[torch.Tensor]:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 32.00 MiB")


class CorruptCopy(CpuGpu):
    def copy(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        dst.copy_(src)
        dst[0] ^= 1


class CorruptPeerLink(CpuGpu):
    def peer_copy(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        dst.copy_(src)
        dst[-1] = (int(src[-1]) + 1) % 256  # one byte off by one on every crossing


class XidError(CpuGpu):
    def matmul(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")


def _config(**fields: object) -> GateConfig:
    base: dict[str, object] = {
        "master_addr": "127.0.0.1",
        "master_port": 29500,
        "nnodes": 1,
        "node_rank": 0,
        "nproc_per_node": 2,
        "node_name": "node-a",
        "device": "cuda",
        "backend": "gloo",
        "matmul_size": 64,
        "memory_fraction": 0.5,
        "device_checks": frozenset({"visible", "memory", "matmul", "p2p"}),
    }
    base.update(fields)
    return GateConfig(**base)  # type: ignore[arg-type]


def _fails(gpu: Gpu, config: GateConfig, reason_id: str, fragment: str, local_rank: int = 1) -> None:
    """``gpu`` fails ``reason_id``: the report, its JSON and the log table all say so."""
    outcome = check_device(local_rank, config, gpu)
    assert outcome.failure is not None, f"{type(gpu).__name__} passed the device checks"
    assert outcome.failure.reason_id == reason_id, outcome.failure
    assert fragment in outcome.failure.message, outcome.failure.message
    assert outcome.failure.message.startswith(f"node 0 (node-a) GPU {local_rank}: ")
    record = RankRecord(
        rank=local_rank, node_rank=0, node="node-a", device=outcome.figures, failure=outcome.failure
    )
    report = build_report(config, own=[record], job=[record], agent_failure=None, duration_s=1.0)
    assert report.exit_code == SmokeExit.FAIL == FAILURES[reason_id].exit_code
    sent = json.loads(report.to_termination_message())
    assert sent["ok"] is False and sent["exit_code"] == int(SmokeExit.FAIL)
    assert sent["failed_check"] == reason_id and fragment in sent["reason"]
    assert sent["remedy"] == FAILURES[reason_id].remedy
    assert sent["suspect_node_ranks"] == [0]
    assert [d["ok"] for d in sent["devices"]] == [False]
    table = format_table(report, [record]).splitlines()
    assert f"  remedy: {FAILURES[reason_id].remedy}" in table
    assert f"FAIL (exit 1) [{reason_id}] in 1.0s" in table


def test_a_healthy_gpu_passes_every_check_with_its_figures() -> None:
    outcome = check_device(1, _config(min_tflops=1e-6, min_mem_bw_gbps=1e-6), CpuGpu())
    assert outcome.failure is None
    assert outcome.figures.ok and outcome.figures.name == "fake GPU 1"
    assert outcome.figures.tflops == pytest.approx(2 * 64**3 / 1e-6 / 1e12)
    assert outcome.figures.mem_bw_gbps == pytest.approx(2 * 4 * MIB / 1e-6 / 1e9)
    assert "p2p GPU 1 -> GPU 0 -> GPU 1: 2 MiB verified, direct peer access" in outcome.notes


@pytest.mark.parametrize(
    ("gpu", "reason_id", "fragment"),
    [
        (NoDriver(), "device.driver", "CUDA unavailable: Found no NVIDIA driver"),
        (NoCuda(), "device.cuda-unavailable", "CUDA unavailable"),
        (WrongFp32Matmul(), "device.matmul", "fp32 matmul wrong: relative error"),
        (CorruptBf16Product(), "device.matmul", "bf16 matmul checksum off by"),
        (LittleFreeMemory(), "device.memory", "GiB wanted (memoryFraction), only 0.00195 GiB free"),
        (AliasedMemory(), "device.memory-corrupt", "bytes did not read back the pattern written"),
        (OutOfMemory(), "device.memory", "out of memory: CUDA out of memory"),
        (CorruptCopy(), "device.memory-corrupt", "device-to-device copy differs from its source"),
        (CorruptPeerLink(), "device.p2p", "1 of 2097152 bytes wrong after a copy to GPU 0 and back"),
        (XidError(), "device.driver", "CUDA error: an illegal memory access"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, CpuGpu) else None,
)
def test_a_faulty_gpu_fails_its_check(gpu: Gpu, reason_id: str, fragment: str) -> None:
    _fails(gpu, _config(), reason_id, fragment)


def test_an_invisible_gpu_fails_the_count() -> None:
    _fails(CpuGpu(gpus=1), _config(), "device.count", "not visible, 1 of 2 requested GPUs visible")


def test_more_visible_gpus_than_the_job_asked_for_fail_the_count() -> None:
    _fails(CpuGpu(gpus=3), _config(), "device.count", "3 GPUs visible, but the job asked for 2 per node")
    without_visible = _config(device_checks=frozenset({"memory", "matmul"}))
    assert check_device(1, without_visible, CpuGpu(gpus=3)).failure is None


def test_matmul_below_the_minimum_tflops_fails() -> None:
    _fails(Slow(), _config(min_tflops=1.0), "device.matmul", "TFLOP/s < minimum 1 (minMatmulTFLOPS)")
    assert check_device(1, _config(), Slow()).failure is None  # 0 = report only


def test_copy_bandwidth_below_the_minimum_fails() -> None:
    slow = _config(min_mem_bw_gbps=1.0)
    _fails(Slow(), slow, "device.bandwidth", "GB/s < minimum 1 (minMemoryBandwidthGBps)")


def test_the_inverted_pass_catches_a_bit_stuck_at_one() -> None:
    class StuckBit(CpuGpu):
        def allocate_chunks(
            self, device: torch.device, nbytes: int, chunk_bytes: int
        ) -> Sequence[torch.Tensor]:
            chunks = super().allocate_chunks(device, nbytes, chunk_bytes)
            real_fill = torch.Tensor.fill_
            first = chunks[0]

            class Stuck(torch.Tensor):
                def fill_(self, value: object) -> torch.Tensor:  # type: ignore[override]
                    real_fill(self, value)
                    first[0] |= 0x01  # bit 0 of the first byte always reads 1
                    return self

            return [c.as_subclass(Stuck) for c in chunks]

    # pattern 0xA5 has bit 0 set, so only the inverted pass (0x5A) can see the stuck bit
    assert chunk_patterns(1, inverted=False) == [0xA5] and chunk_patterns(1, inverted=True) == [0x5A]
    _fails(StuckBit(), _config(), "device.memory-corrupt", "did not read back the inverted pattern")


def test_p2p_is_skipped_with_a_note_on_a_one_gpu_node() -> None:
    outcome = check_device(0, _config(nproc_per_node=1), CpuGpu(gpus=1))
    assert outcome.failure is None and "p2p skipped: one GPU visible" in outcome.notes


def test_neighbouring_chunks_get_different_patterns() -> None:
    patterns = chunk_patterns(256, inverted=False)
    assert len(set(patterns)) == 256
    assert [0xFF - p for p in patterns] == chunk_patterns(256, inverted=True)


def test_unknown_device_checks_and_negative_minimums_are_config_errors() -> None:
    with pytest.raises(
        GateConfigError,
        match=r"deviceChecks\[0\]: unknown value string \"nvlink\": use one of visible, memory, matmul, p2p",
    ):
        _config(device_checks=frozenset({"visible", "nvlink"}))
    with pytest.raises(GateConfigError, match="minMatmulTFLOPS"):
        replace(_config(), min_tflops=-1.0)
