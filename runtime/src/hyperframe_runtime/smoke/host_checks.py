"""Node-level checks that need no device: /dev/shm size and RDMA device presence."""

from __future__ import annotations

import os
from pathlib import Path

from hyperframe_runtime.smoke.config import GateConfig
from hyperframe_runtime.smoke.outcome import Failure

__all__ = ["check_host"]

_GIB = float(1 << 30)


def check_host(
    config: GateConfig, *, shm: Path = Path("/dev/shm"), rdma: Path = Path("/sys/class/infiniband")
) -> Failure | None:
    """The first failing host check of this node, or None."""
    where = f"node {config.node_rank} ({config.node_name})"
    suspects = (config.node_rank,)
    if config.min_shm_bytes > 0:
        try:
            stat = os.statvfs(shm)
            size = stat.f_frsize * stat.f_blocks
        except OSError as exc:
            return Failure(
                reason_id="node.shm",
                message=f"{where}: cannot stat {shm}: {exc}",
                suspect_node_ranks=suspects,
            )
        if size < config.min_shm_bytes:
            return Failure(
                reason_id="node.shm",
                message=f"{where}: {shm} is {size / _GIB:.2f} GiB, the runtime requires {config.min_shm_bytes / _GIB:.2f} GiB",
                suspect_node_ranks=suspects,
            )
    if config.require_rdma:
        devices = sorted(p.name for p in rdma.iterdir()) if rdma.is_dir() else []
        if not devices:
            return Failure(
                reason_id="node.rdma",
                message=f"{where}: no InfiniBand/RDMA device under {rdma}, but the runtime requests RDMA",
                suspect_node_ranks=suspects,
            )
    return None
