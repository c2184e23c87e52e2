"""The job-wide part of the gate: a bounded rendezvous that names absentees, and all-reduce timing.

The rendezvous uses the gate's TCPStore directly: every rank sets ``arrive/<rank>`` and bumps a
counter; the last one in sets ``all-arrived``. Waiting on that one key is bounded; on timeout
the per-rank keys tell exactly who never came. All-reduce figures follow nccl-tests: algbw = size
/ time, busbw = algbw x 2(n-1)/n, with the time of the slowest rank.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Final

import torch
import torch.distributed as dist

# Public torch.distributed names that torch re-exports without `as`, which mypy --strict rejects.
from torch.distributed import PrefixStore, Store, TCPStore  # type: ignore[attr-defined]

from hyperframe_runtime.smoke.config import GateConfig
from hyperframe_runtime.smoke.outcome import AllReduceFigure, Failure

__all__ = [
    "PrefixStore",
    "Store",
    "TCPStore",
    "allreduce_figures",
    "arrive",
    "bus_bandwidth",
    "failures_reported",
    "missing_ranks",
    "report_failure",
    "wait_for_all",
]

_ALL_ARRIVED: Final = "all-arrived"
_ARRIVED: Final = "arrived"
_FAILED: Final = "failed"


def bus_bandwidth(algbw: float, world_size: int) -> float:
    """nccl-tests' all-reduce bus bandwidth: what each link carries, comparable across sizes of n."""
    if world_size < 2:
        return 0.0
    return algbw * 2.0 * (world_size - 1) / world_size


def arrive(store: Store, rank: int, world_size: int) -> None:
    """Mark ``rank`` present; the last rank in opens the gate for everyone."""
    store.set(f"arrive/{rank}", "1")
    if store.add(_ARRIVED, 1) == world_size:
        store.set(_ALL_ARRIVED, "1")


def report_failure(store: Store) -> None:
    """Count a failed rank or node, so that the others skip the collective instead of hanging in it."""
    store.add(_FAILED, 1)


def failures_reported(store: Store) -> int:
    return int(store.add(_FAILED, 0))


def wait_for_all(store: Store, world_size: int, timeout_s: float) -> list[int]:
    """Wait until every rank arrived; return the ranks still missing at the timeout (empty = all)."""
    try:
        store.wait([_ALL_ARRIVED], timedelta(seconds=timeout_s))
        return []
    except dist.DistStoreError:
        pass
    return missing_ranks(store, world_size)


def missing_ranks(store: Store, world_size: int) -> list[int]:
    """Ranks that have not arrived (yet)."""
    return [r for r in range(world_size) if not store.check([f"arrive/{r}"])]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def allreduce_figures(
    config: GateConfig, rank: int, device: torch.device
) -> tuple[list[AllReduceFigure], Failure | None]:
    """Verified then timed all-reduce at each configured size, in the initialised process group."""
    world = config.world_size
    expected = world * (world + 1) / 2  # sum of (rank + 1): exact in fp32 for any real job size
    figures: list[AllReduceFigure] = []
    for size in sorted(config.allreduce_sizes):
        numel = max(1, size // 4)
        label = _human_size(numel * 4)
        buffer = torch.full((numel,), float(rank + 1), dtype=torch.float32, device=device)
        dist.all_reduce(buffer)
        if not bool((buffer == expected).all()):
            wrong = int((buffer != expected).sum())
            return figures, Failure(
                reason_id="collective.result",
                message=f"all-reduce of {label}: {wrong} of {numel} values wrong on rank {rank} (expected {expected:g})",
            )
        buffer.zero_()
        dist.all_reduce(torch.zeros(1, device=device))  # line everyone up before timing
        _sync(device)
        start = time.perf_counter()
        for _ in range(config.iterations):
            dist.all_reduce(buffer)
        _sync(device)
        elapsed = torch.tensor(
            [(time.perf_counter() - start) / config.iterations], dtype=torch.float64, device=device
        )
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        if not bool((buffer == 0).all()):
            return figures, Failure(
                reason_id="collective.result",
                message=f"all-reduce of {label}: zeros did not stay zero on rank {rank}",
            )
        seconds = max(float(elapsed.item()), 1e-9)
        algbw = numel * 4 / seconds / 1e9
        figures.append(
            AllReduceFigure(
                size_bytes=numel * 4,
                seconds=seconds,
                algbw_gbps=algbw,
                busbw_gbps=bus_bandwidth(algbw, world),
            )
        )
    return figures, None


def _human_size(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"
