"""The per-GPU checks of one rank, written against a small :class:`Gpu` interface.

:class:`~hyperframe_runtime.smoke.cuda_checks.CudaGpu` is the real one; tests pass fakes (CPU
tensors with one fault each), so every branch that fails a device is exercised without a GPU.
Checks, in order (the first failure ends the rank's device checks; which ones run follows the
runtime's ``smoke.deviceChecks``):

1. CUDA is available (``device.cuda-unavailable``, or ``device.driver`` when torch blames the driver);
2. this rank's GPU is visible, and with ``visible`` the visible count equals the GPUs the job asked
   for per node, no fewer and no more (``device.count``);
3. ``matmul``: an fp32 512x512 matmul against a float64 CPU reference, then ``matmul_size``^2 bf16
   matmuls timed for TFLOP/s with a checksum identity; fails on a wrong result or below the
   runtime's ``minMatmulTFLOPS`` (``device.matmul``);
4. ``memory``: allocates ``memoryFraction`` of device memory (``device.memory``), writes a
   different byte pattern into each chunk, reads every chunk back, then the same with every bit
   flipped (``device.memory-corrupt``); then times device-to-device copies and checks the copy,
   failing below the runtime's ``minMemoryBandwidthGBps`` (``device.bandwidth``);
5. ``p2p`` (two or more GPUs on the node): copies a pattern to the next local GPU and back and
   compares (``device.p2p``).

A CUDA error anywhere is ``device.driver``; running out of memory is ``device.memory``. The node
agent bounds the whole step in time, so a hung GPU gives ``device.hang`` naming the device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import torch
from hyperframe.smoke_report import DeviceFigures

from hyperframe_runtime.smoke.config import GateConfig
from hyperframe_runtime.smoke.outcome import Failure
from hyperframe_runtime.smoke.probe import DeviceOutcome

__all__ = ["CORRECTNESS_SIZE", "Gpu", "GpuProbe", "check_device", "chunk_patterns"]

TIMED_ITERS: Final = 10
CORRECTNESS_SIZE: Final = 512
_CORRECTNESS_TOLERANCE: Final = 1e-2  # relative; covers TF32 if a user enabled it
_CHECKSUM_TOLERANCE: Final = 1e-2
_BANDWIDTH_BYTES: Final = 1 << 30
_MAX_CHUNK_BYTES: Final = 64 << 20
_MIN_CHUNKS: Final = 16
_P2P_BYTES: Final = 64 << 20


class Gpu(Protocol):
    """What the checks need from the devices of one node."""

    def availability(self) -> tuple[bool, str]:
        """(CUDA usable, what torch said when it is not)."""
        ...

    def count(self) -> int:
        """Visible GPUs."""
        ...

    def select(self, index: int) -> torch.device:
        """Make GPU ``index`` current; the device its tensors live on."""
        ...

    def describe(self, index: int) -> tuple[str, tuple[str, ...]]:
        """(device name, notes: driver, torch CUDA, compute capability)."""
        ...

    def mem_get_info(self, device: torch.device) -> tuple[int, int]:
        """(free, total) bytes of ``device``."""
        ...

    def allocate_chunks(self, device: torch.device, nbytes: int, chunk_bytes: int) -> Sequence[torch.Tensor]:
        """``nbytes`` of uint8 device memory in one allocation, as chunks of ``chunk_bytes``."""
        ...

    def matmul(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor: ...

    def copy(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        """``dst.copy_(src)``, also between devices."""
        ...

    def seconds_per_call(self, fn: Callable[[], object], calls: int, device: torch.device) -> float:
        """Device time of one call of ``fn``, averaged over ``calls`` back-to-back calls."""
        ...

    def peer_copy(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        """``dst.copy_(src)`` where the two live on different GPUs."""
        ...

    def can_access_peer(self, index: int, peer: int) -> bool: ...

    def release(self) -> None:
        """Return cached device memory."""
        ...


@dataclass(frozen=True, slots=True)
class GpuProbe:
    """A :class:`~hyperframe_runtime.smoke.probe.DeviceProbe` running the checks on ``gpu``."""

    gpu: Gpu

    def check(self, local_rank: int, config: GateConfig) -> DeviceOutcome:
        return check_device(local_rank, config, self.gpu)


def check_device(local_rank: int, config: GateConfig, gpu: Gpu) -> DeviceOutcome:
    """Run the configured checks on local GPU ``local_rank``; never raises for a device fault."""
    where = f"node {config.node_rank} ({config.node_name}) GPU {local_rank}"
    suspects = (config.node_rank,)
    absent = DeviceFigures(index=local_rank, name="", ok=False, node_rank=config.node_rank)

    def failed(
        reason_id: str, message: str, figures: DeviceFigures = absent, notes: tuple[str, ...] = ()
    ) -> DeviceOutcome:
        failure = Failure(reason_id=reason_id, message=f"{where}: {message}", suspect_node_ranks=suspects)
        return DeviceOutcome(figures=figures, failure=failure, notes=notes)

    available, said = gpu.availability()
    if not available:
        reason = "device.driver" if "driver" in said.lower() else "device.cuda-unavailable"
        return failed(reason, f"CUDA unavailable: {said}")
    count, wanted = gpu.count(), config.nproc_per_node
    if local_rank >= count:
        return failed("device.count", f"not visible, {count} of {wanted} requested GPUs visible")
    if "visible" in config.device_checks and count != wanted:
        return failed(
            "device.count",
            f"{count} GPUs visible, but the job asked for {wanted} per node (gpusPerNode); the "
            "container must see exactly its own GPUs",
        )
    device = gpu.select(local_rank)
    name, notes = gpu.describe(local_rank)
    tflops: float | None = None
    bandwidth: float | None = None
    failure: tuple[str, str] | None = None
    try:
        if "matmul" in config.device_checks:
            tflops, failure = _matmul(gpu, device, config)
        if failure is None and "memory" in config.device_checks:
            failure = _memory(gpu, device, config)
            if failure is None:
                bandwidth, failure = _bandwidth(gpu, device, config)
        if failure is None and "p2p" in config.device_checks:
            failure, note = _p2p(gpu, local_rank, count)
            notes = (*notes, note)
    except torch.cuda.OutOfMemoryError as exc:
        tflops, bandwidth, failure = None, None, ("device.memory", f"out of memory: {exc}")
    except RuntimeError as exc:  # CUDA errors (Xid, ECC) surface as RuntimeError
        tflops, bandwidth, failure = None, None, ("device.driver", f"CUDA error: {exc}")
    finally:
        gpu.release()
    figures = DeviceFigures(
        index=local_rank,
        name=name,
        tflops=tflops,
        mem_bw_gbps=bandwidth,
        ok=failure is None,
        node_rank=config.node_rank,
    )
    if failure is not None:
        return failed(*failure, figures=figures, notes=notes)
    return DeviceOutcome(figures=figures, notes=notes)


def _matmul(
    gpu: Gpu, device: torch.device, config: GateConfig
) -> tuple[float | None, tuple[str, str] | None]:
    """fp32 matmul against a float64 CPU reference, then bf16 TFLOP/s with a checksum identity."""
    gen = torch.Generator().manual_seed(1234)
    a = torch.randn(CORRECTNESS_SIZE, CORRECTNESS_SIZE, generator=gen)
    b = torch.randn(CORRECTNESS_SIZE, CORRECTNESS_SIZE, generator=gen)
    reference = a.double() @ b.double()
    got = gpu.matmul(a.to(device), b.to(device)).cpu().double()
    error = float((got - reference).abs().max() / reference.abs().max())
    if not error <= _CORRECTNESS_TOLERANCE:
        return None, (
            "device.matmul",
            f"fp32 matmul wrong: relative error {error:.3g} > {_CORRECTNESS_TOLERANCE}",
        )

    n = config.matmul_size
    # Positive inputs make the sum of the product a well-conditioned checksum: sum(X @ Y) equals
    # colsum(X) . rowsum(Y), so silent corruption of the timed bf16 product is caught too.
    x = torch.rand(n, n, device=device, dtype=torch.bfloat16)
    y = torch.rand(n, n, device=device, dtype=torch.bfloat16)
    products: list[torch.Tensor] = []

    def product() -> None:
        products[:] = [gpu.matmul(x, y)]

    product()  # warm-up
    seconds = gpu.seconds_per_call(product, TIMED_ITERS, device)
    tflops = 2.0 * n**3 / seconds / 1e12
    total = float(products[0].float().sum())
    expected = float((x.float().sum(0) * y.float().sum(1)).sum())
    checksum_error = abs(total - expected) / abs(expected)
    if not checksum_error <= _CHECKSUM_TOLERANCE:
        return tflops, ("device.matmul", f"bf16 matmul checksum off by {checksum_error:.3g} (relative)")
    if tflops < config.min_tflops:
        return tflops, (
            "device.matmul",
            f"bf16 matmul {tflops:.3g} TFLOP/s < minimum {config.min_tflops:g} (minMatmulTFLOPS)",
        )
    return tflops, None


def chunk_patterns(chunks: int, *, inverted: bool) -> list[int]:
    """The byte written into each chunk: neighbouring chunks differ (so aliased addresses show),
    and the inverted pass flips every bit (so a bit stuck at 0 or at 1 shows)."""
    patterns = [(0xA5 + 0x3B * i) % 256 for i in range(chunks)]
    return [0xFF - p for p in patterns] if inverted else patterns


def _memory(gpu: Gpu, device: torch.device, config: GateConfig) -> tuple[str, str] | None:
    """Allocate ``memory_fraction`` of device memory, write patterns and read them back."""
    if config.memory_fraction <= 0:
        return None
    free, total = gpu.mem_get_info(device)
    want = int(config.memory_fraction * total)
    chunk = max(1, min(_MAX_CHUNK_BYTES, want // _MIN_CHUNKS))
    gib = 1 << 30
    if want + chunk > free:  # one chunk of headroom for the comparison's temporary
        return (
            "device.memory",
            f"{config.memory_fraction:.0%} of {total / gib:.3g} GiB = {want / gib:.3g} GiB wanted (memoryFraction), "
            f"only {free / gib:.3g} GiB free",
        )
    chunks = gpu.allocate_chunks(device, want, chunk)
    for inverted in (False, True):
        patterns = chunk_patterns(len(chunks), inverted=inverted)
        for block, pattern in zip(chunks, patterns, strict=True):
            block.fill_(pattern)
        wrong = torch.zeros((), dtype=torch.int64, device=device)
        for block, pattern in zip(chunks, patterns, strict=True):
            wrong += block.ne(pattern).sum()
        bad = int(wrong)
        if bad:
            what = "inverted pattern" if inverted else "pattern"
            return (
                "device.memory-corrupt",
                f"{bad} of {want} bytes did not read back the {what} written into {want / gib:.3g} GiB",
            )
    del chunks
    gpu.release()
    return None


def _bandwidth(gpu: Gpu, device: torch.device, config: GateConfig) -> tuple[float, tuple[str, str] | None]:
    """Device-to-device copy bandwidth, counting the read and the write (as STREAM copy does)."""
    free, _ = gpu.mem_get_info(device)
    size = max(1, min(_BANDWIDTH_BYTES, free // 4))
    (src,) = gpu.allocate_chunks(device, size, size)
    (dst,) = gpu.allocate_chunks(device, size, size)
    src.copy_(torch.randint(0, 256, (size,), dtype=torch.uint8, device=device))
    gpu.copy(dst, src)  # warm-up
    seconds = gpu.seconds_per_call(lambda: gpu.copy(dst, src), TIMED_ITERS, device)
    gbps = 2.0 * size / seconds / 1e9
    if not torch.equal(dst, src):
        return gbps, (
            "device.memory-corrupt",
            f"a {size >> 20} MiB device-to-device copy differs from its source",
        )
    if gbps < config.min_mem_bw_gbps:
        return gbps, (
            "device.bandwidth",
            f"memory bandwidth {gbps:.3g} GB/s < minimum {config.min_mem_bw_gbps:g} (minMemoryBandwidthGBps)",
        )
    return gbps, None


def _p2p(gpu: Gpu, index: int, count: int) -> tuple[tuple[str, str] | None, str]:
    """Copy a pattern to the next local GPU and back; (failure, note)."""
    if count < 2:
        return None, "p2p skipped: one GPU visible"
    peer = (index + 1) % count
    there = gpu.select(peer)
    here = gpu.select(index)
    size = max(1, min(_P2P_BYTES, gpu.mem_get_info(here)[0] // 8, gpu.mem_get_info(there)[0] // 8))
    (src,) = gpu.allocate_chunks(here, size, size)
    (remote,) = gpu.allocate_chunks(there, size, size)
    (back,) = gpu.allocate_chunks(here, size, size)
    src.copy_(torch.randint(0, 256, (size,), dtype=torch.uint8, device=here))
    gpu.peer_copy(remote, src)
    gpu.peer_copy(back, remote)
    access = (
        "direct peer access"
        if gpu.can_access_peer(index, peer)
        else "no direct peer access (staged through host)"
    )
    note = f"p2p GPU {index} -> GPU {peer} -> GPU {index}: {size / (1 << 20):g} MiB verified, {access}"
    if not torch.equal(back, src):
        wrong = int(back.ne(src).sum())
        return ("device.p2p", f"{wrong} of {size} bytes wrong after a copy to GPU {peer} and back"), note
    return None, note
