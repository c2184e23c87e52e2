"""Contiguous layer partitioning for heterogeneous devices.

Given the cost of every layer (F + I + W of one micro-batch, on a reference device) and each
rank's time multiplier, :func:`partition_layers` splits the layers into one contiguous stage per
rank (stage r on rank r) so that the slowest stage, ``rank_slowdown[r] * sum(layers of r)``, is as
fast as possible. It is an exact dynamic programme, O(p * L^2). A slow device simply gets fewer
layers; that is what lets a mixed cluster run at the speed of its total compute instead of
p times its slowest device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import ScheduleError

__all__ = ["Partition", "partition_costs", "partition_layers", "vshape_partition"]


@dataclass(frozen=True)
class Partition:
    """Stage s holds layers ``boundaries[s]:boundaries[s + 1]``."""

    boundaries: tuple[int, ...]
    stage_times: tuple[float, ...]
    """Time of each stage per micro-batch on its own device."""

    @property
    def num_stages(self) -> int:
        return len(self.boundaries) - 1

    @property
    def bottleneck(self) -> float:
        return max(self.stage_times)

    def layers_of(self, stage: int) -> range:
        return range(self.boundaries[stage], self.boundaries[stage + 1])


def partition_layers(layer_costs: Sequence[float], rank_slowdown: Sequence[float]) -> Partition:
    """Exact min-bottleneck contiguous split of ``layer_costs`` over ``len(rank_slowdown)`` ranks.

    Every rank gets at least one layer. Ties go to the split with the earliest boundaries, so the
    result is deterministic.
    """
    n_layers, p = len(layer_costs), len(rank_slowdown)
    if p < 1:
        raise ScheduleError("rank_slowdown: empty; give one time multiplier per rank")
    if n_layers < p:
        raise ScheduleError(
            f"layer_costs: {n_layers} layers cannot fill {p} stages; every rank needs at least one layer"
        )
    if any(c < 0 for c in layer_costs) or any(s <= 0 for s in rank_slowdown):
        raise ScheduleError("layer_costs must be >= 0 and rank_slowdown > 0")
    prefix = [0.0]
    for c in layer_costs:
        prefix.append(prefix[-1] + c)
    inf = float("inf")
    # best[k][i]: smallest bottleneck putting layers [0, i) on ranks 0..k-1; choice[k][i]: last cut.
    best = [[inf] * (n_layers + 1) for _ in range(p + 1)]
    choice = [[0] * (n_layers + 1) for _ in range(p + 1)]
    best[0][0] = 0.0
    for k in range(1, p + 1):
        slow = rank_slowdown[k - 1]
        for i in range(k, n_layers - (p - k) + 1):
            for j in range(k - 1, i):
                value = max(best[k - 1][j], slow * (prefix[i] - prefix[j]))
                if value < best[k][i] - 1e-12:
                    best[k][i] = value
                    choice[k][i] = j
    cuts = [n_layers]
    for k in range(p, 0, -1):
        cuts.append(choice[k][cuts[-1]])
    boundaries = tuple(reversed(cuts))
    times = tuple(rank_slowdown[s] * (prefix[boundaries[s + 1]] - prefix[boundaries[s]]) for s in range(p))
    return Partition(boundaries=boundaries, stage_times=times)


def vshape_partition(layer_costs: Sequence[float], rank_slowdown: Sequence[float]) -> Partition:
    """Split into 2p chunks for the V placement (chunks r and 2p-1-r on rank r).

    Each rank gets the layer count of the exact one-per-rank split, cut into two chunks of
    nearly equal size; laid out in V order the chunks are contiguous. With equal layers the rank
    loads equal the exact optimum; with unequal layers this is a heuristic.
    """
    flat = partition_layers(layer_costs, rank_slowdown)
    p = len(rank_slowdown)
    counts = [len(flat.layers_of(r)) for r in range(p)]
    if min(counts) < 2:
        raise ScheduleError(
            f"layer_costs: the V placement needs at least 2 layers per rank; the split gives {counts}"
        )
    chunk_rank = [c if c < p else 2 * p - 1 - c for c in range(2 * p)]
    sizes = [counts[r] // 2 if c < p else counts[r] - counts[r] // 2 for c, r in enumerate(chunk_rank)]
    boundaries = [0]
    for size in sizes:
        boundaries.append(boundaries[-1] + size)
    prefix = [0.0]
    for cost in layer_costs:
        prefix.append(prefix[-1] + cost)
    times = tuple(
        rank_slowdown[chunk_rank[c]] * (prefix[boundaries[c + 1]] - prefix[boundaries[c]])
        for c in range(2 * p)
    )
    return Partition(boundaries=tuple(boundaries), stage_times=times)


def partition_costs(
    partition: Partition,
    *,
    layer_forward: Sequence[float],
    layer_backward_input: Sequence[float],
    layer_backward_weight: Sequence[float],
    layer_activation: Sequence[float] | None = None,
    rank_slowdown: Sequence[float] = (),
    p2p: float = 0.0,
) -> CostModel:
    """The per-stage cost model of a partition (``rank_slowdown`` is per rank of the placement)."""

    def per_stage(values: Sequence[float]) -> tuple[float, ...]:
        return tuple(sum(values[i] for i in partition.layers_of(s)) for s in range(partition.num_stages))

    return CostModel(
        forward=per_stage(layer_forward),
        backward_input=per_stage(layer_backward_input),
        backward_weight=per_stage(layer_backward_weight),
        activation=per_stage(layer_activation) if layer_activation is not None else (),
        rank_slowdown=tuple(rank_slowdown),
        p2p=p2p,
    )
