"""Re-partition a model's layers from measured costs: the runtime half of ``schedule.partition``.

With a measured layer split (``layer_split = "measured"``, or ``"auto"`` under the hyperframe policy)
the frame loop runs its first :data:`PARTITION_FRAMES` frames on
the even split and gathers every rank's op timings (``pipeline.calibration``). This module turns
those measured per-stage costs into what the partitioner needs, per-layer costs and per-rank
speeds (a :class:`LayerProfile`), and asks the partitioner for each placement's split (the V-aware
one for a V, the exact one-stage-per-rank one otherwise). A split is taken only when the profile
predicts its slowest rank at least :data:`SPLIT_MARGIN` faster than the even split's; a re-split
is kept for the whole run, so one made on timing noise would cost every later frame. The frame
loop then moves the stages to
that split (``StageSet.moved_to``: parameters and AdamW state are keyed by parameter name, which
the split does not change, so training continues exactly) and saves the profile in every
snapshot, so a resumed run rebuilds the same split.

Separating a layer's cost from its rank's speed needs an assumption, because each stage was
measured on one rank only: **the layers are alike** (the built-in GPT's blocks are). A rank's
slowdown is then its measured seconds per layer over all its stages, relative to the fastest
rank, and a stage's reference cost is spread evenly over its layers (the embedding and the head
ride on the first and last stage's layers). For models with unlike layers pass the layer costs
yourself to :func:`~hyperframe_runtime.schedule.partition.vshape_partition`.

**A second look** (:func:`two_look_profile`, one stage per rank). The first stage's embedding and
the last stage's head and loss are not layers like the others: a large vocabulary makes the head
cost several blocks, and the first look reads that as a slow last rank, so it moves too few
blocks (the head stays where it is, whatever the split). When the first look moved layers, the
frame loop measures :data:`PARTITION_FRAMES` more frames on the new split; each rank's layer count
changed, so the two looks separate each rank's seconds per layer (the difference over the
difference in layers) from the fixed extra of the first and last stage (the rest), and the
partitioner splits again with the extras on the first and last layer. A difference is only as
good as its size against the noise: where a heavy head keeps a rank's times close (12 block-costs
on the last rank, then 10), a few per cent of noise could read as a rank several times faster or
slower. A rank whose two times differ by less than :data:`RELIABLE_DIFFERENCE` of their sum is
taken to run at the median pace of the ranks whose difference is larger (the layers are alike,
and so, unless measured otherwise, are the ranks), or at its time over its layers in either look
where that is less (the extras are never negative, so no rank is slower than that).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Final

from hyperframe_runtime.models.spec import ModelSpec, check_split
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import OpKind, Placement
from hyperframe_runtime.schedule.partition import partition_layers, vshape_partition

__all__ = [
    "PARTITION_FRAMES",
    "RELIABLE_DIFFERENCE",
    "SPLIT_MARGIN",
    "LayerProfile",
    "can_partition",
    "even_split",
    "layer_costs_and_speeds",
    "repartition",
    "second_look_tells",
    "split_spec",
    "stage_seconds",
    "two_look_profile",
]

PARTITION_FRAMES: Final = 4
"""Frames on the even split before a measured re-split: one warm-up frame (torch's shape
inference, first allocations) and three measured ones."""
RELIABLE_DIFFERENCE: Final = 0.10
"""A rank's seconds per layer come from its two looks when their times differ by at least 10 % of
their sum: a 3 % error in either time is then at most a 30 % error in the pace."""
SPLIT_MARGIN: Final = 0.10
"""The partitioner's split replaces the even one only when the measured profile predicts its
slowest rank at least 10 % faster: over the 5 to 10 % by which three frames' per-rank timings
swing on this project's shared CPU hosts."""


def even_split(num_layers: int, num_stages: int) -> tuple[int, ...]:
    """Boundaries giving each stage ``num_layers / num_stages`` layers, as evenly as they go."""
    cuts = tuple(round(i * num_layers / num_stages) for i in range(num_stages + 1))
    check_split(cuts, num_layers)
    return cuts


def can_partition(placement: Placement) -> bool:
    """Whether the partitioner splits for ``placement`` (one stage per rank or the V)."""
    return (
        placement == Placement.one_per_rank(placement.num_ranks)
        or placement.is_vshape
        or placement.num_ranks == 1
    )


def stage_seconds(costs: CostModel) -> list[float]:
    """Each stage's F + B seconds per micro-batch (a split backward's I + W counted as B)."""
    return [costs.base_cost(s, OpKind.F) + costs.base_cost(s, OpKind.B) for s in range(costs.num_stages)]


def layer_costs_and_speeds(
    costs: CostModel, placement: Placement, boundaries: Sequence[int]
) -> tuple[list[float], list[float]]:
    """``(reference cost of each layer, slowdown of each rank)`` from per-stage ``costs`` measured
    on the split ``boundaries`` (stage s held layers ``boundaries[s]:boundaries[s+1]``)."""
    check_split(boundaries, boundaries[-1])
    if len(boundaries) - 1 != placement.num_stages:
        raise ValueError(
            f"layer split {list(boundaries)}: has {len(boundaries) - 1} stages but the placement "
            f"has {placement.num_stages}; give one boundary more than there are stages"
        )
    seconds = stage_seconds(costs)
    per_layer = []
    for rank in range(placement.num_ranks):
        stages = placement.stages_of(rank)
        layers = sum(boundaries[s + 1] - boundaries[s] for s in stages)
        per_layer.append(sum(seconds[s] for s in stages) / layers)
    fastest = min(per_layer)
    slowdown = [x / fastest if fastest > 0 else 1.0 for x in per_layer]
    layer_costs = []
    for s in range(placement.num_stages):
        count = boundaries[s + 1] - boundaries[s]
        reference = seconds[s] / slowdown[placement.rank_of(s)]
        layer_costs.extend([reference / count] * count)
    return layer_costs, slowdown


def second_look_tells(placement: Placement, first: Sequence[int], second: Sequence[int]) -> bool:
    """Whether measuring ``second`` after ``first`` separates the extras (one stage per rank, and
    the first and last rank's layer counts differ between the two splits)."""
    p = placement.num_ranks
    if p < 2 or placement != Placement.one_per_rank(p):
        return False
    return all(first[r + 1] - first[r] != second[r + 1] - second[r] for r in (0, p - 1))


def two_look_profile(
    placement: Placement,
    first: tuple[CostModel, Sequence[int]],
    second: tuple[CostModel, Sequence[int]],
) -> LayerProfile | None:
    """The profile of two measurements ``(per-stage costs, split)`` of one stage per rank on two
    splits (see the module docstring); None where they cannot tell the extras apart: another
    placement, the first or last rank kept its layer count, no rank's times differ enough to
    tell its pace (:data:`RELIABLE_DIFFERENCE`), or noise left a rank's seconds per layer at or
    below zero."""
    (costs_a, split_a), (costs_b, split_b) = first, second
    p = placement.num_ranks
    if not second_look_tells(placement, split_a, split_b):
        return None
    t_a, t_b = stage_seconds(costs_a), stage_seconds(costs_b)
    n_a = [split_a[r + 1] - split_a[r] for r in range(p)]
    n_b = [split_b[r + 1] - split_b[r] for r in range(p)]
    paces: list[float | None] = []
    for r in range(p):
        if n_a[r] == n_b[r]:  # a middle rank (no extra) that kept its layers: seconds over layers
            paces.append((t_a[r] + t_b[r]) / (n_a[r] + n_b[r]))
        elif abs(t_a[r] - t_b[r]) >= RELIABLE_DIFFERENCE * (t_a[r] + t_b[r]):
            paces.append((t_a[r] - t_b[r]) / (n_a[r] - n_b[r]))
        else:
            paces.append(None)
    known = [x for x in paces if x is not None]
    if not known or min(known) <= 0:
        return None
    typical = statistics.median(known)
    # The extras are never negative, so a rank's pace is at most its time over its layers in
    # either look: a fast rank whose times hardly differ does not take a slow rank's pace.
    per_layer = [
        min(typical if x is None else x, t_a[r] / n_a[r], t_b[r] / n_b[r]) for r, x in enumerate(paces)
    ]

    def extra(r: int) -> float:
        return max(0.0, (t_a[r] - per_layer[r] * n_a[r] + t_b[r] - per_layer[r] * n_b[r]) / 2)

    fastest = min(per_layer)
    slowdown = [x / fastest for x in per_layer]
    layer_costs = [fastest] * split_a[-1]
    layer_costs[0] += extra(0) / slowdown[0]
    layer_costs[-1] += extra(p - 1) / slowdown[p - 1]
    return LayerProfile(tuple(layer_costs), tuple(slowdown))


def repartition(
    placement: Placement, layer_costs: Sequence[float], rank_slowdown: Sequence[float]
) -> tuple[int, ...]:
    """The layer split the partitioner picks for ``placement`` (one stage per rank or a V)."""
    if placement == Placement.one_per_rank(placement.num_ranks):
        return partition_layers(layer_costs, rank_slowdown).boundaries
    if can_partition(placement):
        return vshape_partition(layer_costs, rank_slowdown).boundaries
    raise ValueError(
        f"placement {list(placement.stage_to_rank)}: the partitioner splits for one stage per rank "
        "or the V only; use stages_per_rank 1 or 2 with the hyperframe policy"
    )


def split_spec(spec: ModelSpec, boundaries: Sequence[int]) -> ModelSpec:
    """``spec`` whose stages hold the layers of ``boundaries`` (through its per-layer hook)."""
    cuts = tuple(boundaries)
    spec.check_split(cuts)
    return dataclasses.replace(spec, build_stage=lambda stage, num_stages: spec.build_split(stage, cuts))


@dataclasses.dataclass(frozen=True)
class LayerProfile:
    """Per-layer reference costs and per-rank slowdowns measured on one split: enough to split
    the layers for any placement of the same ranks."""

    layer_costs: tuple[float, ...]
    """Seconds of F + B of each layer on the fastest rank, per micro-batch."""
    rank_slowdown: tuple[float, ...]
    """Each pipeline rank's time per layer, relative to the fastest (1.0)."""

    @classmethod
    def measure(cls, costs: CostModel, placement: Placement, boundaries: Sequence[int]) -> LayerProfile:
        """The profile of per-stage ``costs`` measured on ``placement`` with ``boundaries``."""
        layers, slowdown = layer_costs_and_speeds(costs, placement, boundaries)
        return cls(tuple(layers), tuple(slowdown))

    def split_for(self, placement: Placement) -> tuple[int, ...]:
        """The partitioner's split for ``placement``; the even split where it has none (looped)."""
        if placement.num_ranks != len(self.rank_slowdown):
            raise ValueError(
                f"placement {list(placement.stage_to_rank)}: has {placement.num_ranks} ranks but the "
                f"layer profile was measured on {len(self.rank_slowdown)}"
            )
        even = even_split(len(self.layer_costs), placement.num_stages)
        if not can_partition(placement):
            return even
        split = repartition(placement, self.layer_costs, self.rank_slowdown)
        if self.slowest_rank_s(placement, split) > (1 - SPLIT_MARGIN) * self.slowest_rank_s(placement, even):
            return even
        return split

    def slowest_rank_s(self, placement: Placement, boundaries: Sequence[int]) -> float:
        """The profile's F + B seconds per micro-batch of the busiest rank of ``placement`` when
        its stages hold the layers of ``boundaries``."""
        load = [0.0] * placement.num_ranks
        for stage in range(placement.num_stages):
            rank = placement.rank_of(stage)
            layers = self.layer_costs[boundaries[stage] : boundaries[stage + 1]]
            load[rank] += self.rank_slowdown[rank] * sum(layers)
        return max(load)

    def to_json(self) -> dict[str, Any]:
        return {"layer_costs": list(self.layer_costs), "rank_slowdown": list(self.rank_slowdown)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LayerProfile:
        return cls(
            tuple(float(x) for x in data["layer_costs"]), tuple(float(x) for x in data["rank_slowdown"])
        )
