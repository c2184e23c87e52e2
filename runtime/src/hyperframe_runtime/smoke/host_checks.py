"""Node-level checks that need no device: /dev/shm size and RDMA device presence.

The facts come from probes (callables) so that the logic is pure: the gate passes the real
ones, which read the mounted filesystem; tests pass their own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from hyperframe_runtime.smoke.config import GateConfig
from hyperframe_runtime.smoke.outcome import Failure

__all__ = ["IB_CLASS_PATH", "SHM_PATH", "check_host", "ib_devices", "mounted_shm_bytes"]

SHM_PATH: Final = Path("/dev/shm")
IB_CLASS_PATH: Final = Path("/sys/class/infiniband")

ShmProbe = Callable[[], int]
"""Size of the mounted /dev/shm in bytes; raises OSError when it cannot be read."""
RdmaProbe = Callable[[], Sequence[str]]
"""Names of the visible InfiniBand/RDMA devices."""


def mounted_shm_bytes(path: Path = SHM_PATH) -> int:
    """Total size of the filesystem at ``path`` (for the tmpfs at /dev/shm: its size= option)."""
    stat = os.statvfs(path)
    return stat.f_frsize * stat.f_blocks


def ib_devices(path: Path = IB_CLASS_PATH) -> list[str]:
    """The RDMA devices the kernel exposes to this container (mlx5_0, ...)."""
    return sorted(p.name for p in path.iterdir()) if path.is_dir() else []


def _size(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


def _shm_problem(config: GateConfig, shm: ShmProbe) -> str | None:
    if config.shm_bytes <= 0 and config.min_shm_bytes <= 0:
        return None
    try:
        size = shm()
    except OSError as exc:
        return f"cannot stat {SHM_PATH}: {exc}"
    if size < config.shm_bytes:
        return (
            f"{SHM_PATH} is {_size(size)}, smaller than the {_size(config.shm_bytes)} the pod is configured "
            "with (the runtime's shmSize, capped by the pod's memory limit); raise the runtime's shm size"
        )
    if size < config.min_shm_bytes:
        return (
            f"{SHM_PATH} is {_size(size)}, under the {_size(config.min_shm_bytes)} floor NCCL needs for "
            f"{config.nproc_per_node} ranks per node; raise the runtime's shm size"
        )
    return None


def check_host(
    config: GateConfig, *, shm: ShmProbe = mounted_shm_bytes, rdma: RdmaProbe = ib_devices
) -> Failure | None:
    """The first failing host check of this node, or None."""
    where = f"node {config.node_rank} ({config.node_name})"
    suspects = (config.node_rank,)
    problem = _shm_problem(config, shm)
    if problem is not None:
        return Failure(reason_id="node.shm", message=f"{where}: {problem}", suspect_node_ranks=suspects)
    if config.require_rdma and not rdma():
        resource = f" ({config.rdma_resource_name})" if config.rdma_resource_name else ""
        return Failure(
            reason_id="node.rdma",
            message=f"{where}: no InfiniBand/RDMA device under {IB_CLASS_PATH}, but the runtime "
            f"requests RDMA{resource}",
            suspect_node_ranks=suspects,
        )
    return None
