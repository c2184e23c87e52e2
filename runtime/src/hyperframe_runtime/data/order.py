"""Which sample each data-parallel replica reads at each position: a pure function, so a position
is all a snapshot needs to resume the data exactly.

Epoch ``e`` is a permutation of all ``num_samples`` indices, seeded by ``(seed, e)``; replica ``r``
of ``replicas`` reads its entries ``r, r + replicas, r + 2 * replicas, ...`` (``num_samples //
replicas`` of them, so every replica reads as many per epoch and the parts are disjoint; the
remainder of the permutation is skipped that epoch). Position ``p`` of replica ``r`` is entry
``p % per_replica`` of epoch ``p // per_replica``; epochs follow each other without end.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import Sampler

from hyperframe_runtime.data.errors import DataError

__all__ = ["ReplicaOrder", "ReplicaSampler"]


def _epoch_seed(seed: int, epoch: int) -> int:
    # Stable across processes and versions (no Python hash); a 63-bit torch seed.
    return (seed * 1_000_003 + epoch * 7_919 + 0x5EED) % (2**63 - 1)


@dataclass(frozen=True, slots=True)
class ReplicaOrder:
    """The read order of one replica (see the module doc)."""

    num_samples: int
    replicas: int
    replica: int
    seed: int
    _perms: dict[int, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 <= self.replica < self.replicas:
            raise ValueError(f"replica {self.replica} is not in 0..{self.replicas - 1}")
        if self.num_samples < self.replicas:
            raise DataError(
                f"data: the dataset has {self.num_samples} sample(s), fewer than the {self.replicas} "
                "data-parallel replicas that each need their own; give more data or lower parallelism.data"
            )

    @property
    def per_replica(self) -> int:
        """Samples each replica reads per epoch."""
        return self.num_samples // self.replicas

    def _perm(self, epoch: int) -> torch.Tensor:
        perm = self._perms.get(epoch)
        if perm is None:
            self._perms.clear()  # one epoch at a time
            gen = torch.Generator().manual_seed(_epoch_seed(self.seed, epoch))
            perm = torch.randperm(self.num_samples, generator=gen)
            self._perms[epoch] = perm
        return perm

    def index(self, position: int) -> int:
        """The dataset index this replica reads at ``position`` (0-based, over all epochs)."""
        epoch, k = divmod(position, self.per_replica)
        return int(self._perm(epoch)[self.replica + k * self.replicas])

    def state(self, position: int) -> dict[str, Any]:
        """The snapshot form of ``position`` on this order."""
        return {
            "position": position,
            "num_samples": self.num_samples,
            "replicas": self.replicas,
            "seed": self.seed,
        }

    def position_from(self, state: dict[str, Any]) -> int:
        """The position a snapshot's :meth:`state` saved; refuses an order it was not saved on."""
        saved = {k: state.get(k) for k in ("num_samples", "replicas", "seed")}
        mine = {"num_samples": self.num_samples, "replicas": self.replicas, "seed": self.seed}
        if saved != mine:
            raise DataError(
                f"data: the snapshot's loader read {saved}, this run reads {mine}: resuming would not "
                "continue the same sample order; resume with the same data, parallelism.data and "
                "seed, or start in a new checkpoint directory"
            )
        return int(state["position"])


class ReplicaSampler(Sampler[int]):
    """The endless index stream of one replica from ``start`` on (a DataLoader's sampler)."""

    def __init__(self, order: ReplicaOrder, start: int = 0) -> None:
        self.order, self.start = order, start

    def __iter__(self) -> Iterator[int]:
        position = self.start
        while True:
            yield self.order.index(position)
            position += 1
