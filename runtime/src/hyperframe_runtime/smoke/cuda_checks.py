"""The CUDA device checks of one rank: visibility, driver, matmul, memory, bandwidth.

Each check measures, then compares with the runtime's minimum (0 = report only). The first
failure ends the device checks of that rank; the parent agent bounds the whole step in time, so a
hung GPU gives a timeout naming the device instead of a hang.
"""

from __future__ import annotations

import shutil
import subprocess
import warnings
from dataclasses import dataclass
from typing import Final

import torch
from hyperframe.smoke_report import DeviceFigures

from hyperframe_runtime.smoke.config import GateConfig
from hyperframe_runtime.smoke.outcome import Failure
from hyperframe_runtime.smoke.probe import DeviceOutcome

__all__ = ["CudaProbe", "driver_version"]

_TIMED_ITERS: Final = 10
_CORRECTNESS_SIZE: Final = 512
_CORRECTNESS_TOLERANCE: Final = 1e-2  # relative; covers TF32 if a user enabled it
_CHECKSUM_TOLERANCE: Final = 1e-2
_BANDWIDTH_BYTES: Final = 1 << 30


def driver_version() -> str:
    """The NVIDIA driver version from nvidia-smi, or "unknown" (the check is informational)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "unknown (no nvidia-smi)"
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown (nvidia-smi failed)"
    lines = out.strip().splitlines()
    return lines[0].strip() if lines else "unknown"


def _timer() -> torch.cuda.Event:
    return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]


def _elapsed_s(start: torch.cuda.Event, end: torch.cuda.Event) -> float:
    end.synchronize()
    return float(start.elapsed_time(end)) / 1000.0


@dataclass(frozen=True, slots=True)
class CudaProbe:
    """The real device checks for CUDA jobs."""

    def check(self, local_rank: int, config: GateConfig) -> DeviceOutcome:
        where = f"node {config.node_rank} ({config.node_name}) GPU {local_rank}"
        absent = DeviceFigures(index=local_rank, name="", ok=False, node_rank=config.node_rank)
        suspects = (config.node_rank,)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            available = torch.cuda.is_available()
        if not available:
            said = "; ".join(str(w.message) for w in caught) or "torch.cuda.is_available() is False"
            reason = "device.driver" if "driver" in said.lower() else "device.cuda-unavailable"
            return DeviceOutcome(
                figures=absent,
                failure=Failure(
                    reason_id=reason,
                    message=f"{where}: CUDA unavailable: {said}",
                    suspect_node_ranks=suspects,
                ),
            )
        count = torch.cuda.device_count()
        if local_rank >= count:
            return DeviceOutcome(
                figures=absent,
                failure=Failure(
                    reason_id="device.count",
                    message=f"{where} is not visible: {count} of {config.nproc_per_node} requested GPUs visible",
                    suspect_node_ranks=suspects,
                ),
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        name = torch.cuda.get_device_name(device)
        major, minor = torch.cuda.get_device_capability(device)
        notes = (
            f"driver {driver_version()}, torch {torch.__version__} CUDA {torch.version.cuda}, sm_{major}{minor}",
        )
        try:
            tflops: float | None = None
            bandwidth: float | None = None
            failure: Failure | None = None
            if "matmul" in config.device_checks:
                tflops, failure = _matmul(device, config, where)
            if failure is None and "memory" in config.device_checks:
                failure = _memory(device, config, where)
                if failure is None:
                    bandwidth, failure = _bandwidth(device, config, where)
        except torch.cuda.OutOfMemoryError as exc:
            tflops, bandwidth = None, None
            failure = Failure(reason_id="device.memory", message=f"{where}: out of memory: {exc}")
        except RuntimeError as exc:  # CUDA errors (Xid, ECC) surface as RuntimeError
            tflops, bandwidth = None, None
            failure = Failure(reason_id="device.driver", message=f"{where}: CUDA error: {exc}")
        finally:
            torch.cuda.empty_cache()
        if failure is not None:
            failure = Failure(
                reason_id=failure.reason_id, message=failure.message, suspect_node_ranks=suspects
            )
        figures = DeviceFigures(
            index=local_rank,
            name=name,
            tflops=tflops,
            mem_bw_gbps=bandwidth,
            ok=failure is None,
            node_rank=config.node_rank,
        )
        return DeviceOutcome(figures=figures, failure=failure, notes=notes)


def _matmul(device: torch.device, config: GateConfig, where: str) -> tuple[float | None, Failure | None]:
    """fp32 matmul against a float64 CPU reference, then bf16 TFLOP/s with a checksum identity."""
    gen = torch.Generator().manual_seed(1234)
    a = torch.randn(_CORRECTNESS_SIZE, _CORRECTNESS_SIZE, generator=gen)
    b = torch.randn(_CORRECTNESS_SIZE, _CORRECTNESS_SIZE, generator=gen)
    reference = a.double() @ b.double()
    got = (a.to(device) @ b.to(device)).cpu().double()
    error = float((got - reference).abs().max() / reference.abs().max())
    if not error <= _CORRECTNESS_TOLERANCE:
        return None, Failure(
            reason_id="device.matmul",
            message=f"{where}: fp32 matmul wrong: relative error {error:.3g} > {_CORRECTNESS_TOLERANCE}",
        )

    n = config.matmul_size
    # Positive inputs make the sum of the product a well-conditioned checksum: sum(X @ Y) equals
    # colsum(X) . rowsum(Y), so silent corruption of the timed bf16 product is caught too.
    x = torch.rand(n, n, device=device, dtype=torch.bfloat16)
    y = torch.rand(n, n, device=device, dtype=torch.bfloat16)
    product = x @ y
    start, end = _timer(), _timer()
    start.record()
    for _ in range(_TIMED_ITERS):
        product = x @ y
    end.record()
    seconds = _elapsed_s(start, end) / _TIMED_ITERS
    tflops = 2.0 * n**3 / seconds / 1e12
    total = float(product.float().sum())
    expected = float((x.float().sum(0) * y.float().sum(1)).sum())
    checksum_error = abs(total - expected) / abs(expected)
    del x, y, product
    if not checksum_error <= _CHECKSUM_TOLERANCE:
        return tflops, Failure(
            reason_id="device.matmul",
            message=f"{where}: bf16 matmul checksum off by {checksum_error:.3g} (relative)",
        )
    if tflops < config.min_tflops:
        return tflops, Failure(
            reason_id="device.matmul",
            message=f"{where}: bf16 matmul {tflops:.1f} TFLOP/s < minimum {config.min_tflops:.1f}",
        )
    return tflops, None


def _memory(device: torch.device, config: GateConfig, where: str) -> Failure | None:
    """Allocate and touch ``memory_fraction`` of total device memory."""
    if config.memory_fraction <= 0:
        return None
    free, total = torch.cuda.mem_get_info(device)
    want = int(config.memory_fraction * total)
    gib = 1 << 30
    if want > free:
        return Failure(
            reason_id="device.memory",
            message=f"{where}: {config.memory_fraction:.0%} of {total / gib:.1f} GiB = {want / gib:.1f} GiB wanted, only {free / gib:.1f} GiB free",
        )
    block = torch.empty(want, dtype=torch.uint8, device=device)
    block.fill_(0xA5)
    torch.cuda.synchronize(device)
    del block
    torch.cuda.empty_cache()
    return None


def _bandwidth(device: torch.device, config: GateConfig, where: str) -> tuple[float, Failure | None]:
    """Device-to-device copy bandwidth, counting the read and the write (as STREAM copy does)."""
    free, _ = torch.cuda.mem_get_info(device)
    size = min(_BANDWIDTH_BYTES, free // 4)
    src = torch.empty(size, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    dst.copy_(src)
    start, end = _timer(), _timer()
    start.record()
    for _ in range(_TIMED_ITERS):
        dst.copy_(src)
    end.record()
    gbps = 2.0 * size * _TIMED_ITERS / _elapsed_s(start, end) / 1e9
    del src, dst
    if gbps < config.min_mem_bw_gbps:
        return gbps, Failure(
            reason_id="device.bandwidth",
            message=f"{where}: memory bandwidth {gbps:.0f} GB/s < minimum {config.min_mem_bw_gbps:.0f}",
        )
    return gbps, None
