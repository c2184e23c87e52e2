"""Rank layout and process groups of a pipeline x data-parallel job.

Global rank ``g`` is pipeline rank ``g % pipeline`` of data-parallel replica ``g // pipeline``: the
ranks of one pipeline are contiguous (on one node when they fit, where the p2p traffic is), and a
data-parallel group holds the same pipeline rank of every replica.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist

__all__ = ["ParallelGroups", "Topology", "build_groups"]


@dataclass(frozen=True, slots=True)
class Topology:
    """Where global rank ``rank`` sits in a ``pipeline`` x ``data`` layout."""

    rank: int
    pipeline: int
    data: int

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.pipeline * self.data:
            raise ValueError(
                f"rank {self.rank} is outside pipeline ({self.pipeline}) x data ({self.data}) = "
                f"{self.pipeline * self.data} ranks"
            )

    @property
    def pp_rank(self) -> int:
        return self.rank % self.pipeline

    @property
    def dp_rank(self) -> int:
        return self.rank // self.pipeline

    def pipeline_ranks(self, replica: int) -> list[int]:
        """Global ranks of replica ``replica``'s pipeline, by pipeline rank."""
        return [replica * self.pipeline + r for r in range(self.pipeline)]

    def data_ranks(self, pp_rank: int) -> list[int]:
        """Global ranks holding pipeline rank ``pp_rank`` in every replica."""
        return [d * self.pipeline + pp_rank for d in range(self.data)]


@dataclass(frozen=True, slots=True)
class ParallelGroups:
    """This rank's pipeline group and (when data > 1) data-parallel group."""

    topology: Topology
    pp_group: dist.ProcessGroup
    dp_group: dist.ProcessGroup | None


def build_groups(topology: Topology) -> ParallelGroups:
    """Create every pipeline and data-parallel group (collective: all ranks call it in step)."""
    pp_group: dist.ProcessGroup | None = None
    dp_group: dist.ProcessGroup | None = None
    for replica in range(topology.data):
        group = dist.new_group(topology.pipeline_ranks(replica))
        if replica == topology.dp_rank:
            pp_group = group
    if topology.data > 1:
        for pp_rank in range(topology.pipeline):
            group = dist.new_group(topology.data_ranks(pp_rank))
            if pp_rank == topology.pp_rank:
                dp_group = group
    if pp_group is None:  # pragma: no cover - every rank is in exactly one replica
        raise RuntimeError(f"rank {topology.rank} found no pipeline group")
    return ParallelGroups(topology, pp_group, dp_group)
