"""The real GPUs: :class:`CudaGpu` implements :class:`~hyperframe_runtime.smoke.device_checks.Gpu`
with ``torch.cuda``, and :class:`CudaProbe` runs the device checks on it.

Timing uses CUDA events around back-to-back calls on the current stream, so the figures are device
time, not host time.
"""

from __future__ import annotations

import shutil
import subprocess
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from hyperframe_runtime.smoke.config import GateConfig
from hyperframe_runtime.smoke.device_checks import check_device
from hyperframe_runtime.smoke.probe import DeviceOutcome

__all__ = ["CudaGpu", "CudaProbe", "driver_version"]


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


@dataclass(frozen=True, slots=True)
class CudaGpu:
    """This node's GPUs through ``torch.cuda``."""

    def availability(self) -> tuple[bool, str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            available = torch.cuda.is_available()
        said = "; ".join(str(w.message) for w in caught) or "torch.cuda.is_available() is False"
        return available, "" if available else said

    def count(self) -> int:
        return torch.cuda.device_count()

    def select(self, index: int) -> torch.device:
        device = torch.device("cuda", index)
        torch.cuda.set_device(device)
        return device

    def describe(self, index: int) -> tuple[str, tuple[str, ...]]:
        major, minor = torch.cuda.get_device_capability(index)
        note = f"driver {driver_version()}, torch {torch.__version__} CUDA {torch.version.cuda}, sm_{major}{minor}"
        return torch.cuda.get_device_name(index), (note,)

    def mem_get_info(self, device: torch.device) -> tuple[int, int]:
        return torch.cuda.mem_get_info(device)

    def allocate_chunks(self, device: torch.device, nbytes: int, chunk_bytes: int) -> Sequence[torch.Tensor]:
        return torch.split(torch.empty(nbytes, dtype=torch.uint8, device=device), chunk_bytes)

    def matmul(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x @ y

    def copy(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        dst.copy_(src)

    def seconds_per_call(self, fn: Callable[[], object], calls: int, device: torch.device) -> float:
        start, end = _timer(), _timer()
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1000.0 / calls

    def peer_copy(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        dst.copy_(src)

    def can_access_peer(self, index: int, peer: int) -> bool:
        return bool(torch.cuda.can_device_access_peer(index, peer))

    def release(self) -> None:
        torch.cuda.empty_cache()


@dataclass(frozen=True, slots=True)
class CudaProbe:
    """The real device checks for CUDA jobs."""

    def check(self, local_rank: int, config: GateConfig) -> DeviceOutcome:
        return check_device(local_rank, config, CudaGpu())
