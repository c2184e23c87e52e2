"""Re-partition a model's layers from measured costs: the runtime half of ``schedule.partition``.

With ``layer_split = "measured"`` the frame loop runs its first :data:`PARTITION_FRAMES` frames on
the even split and gathers every rank's op timings (``pipeline.calibration``). This module turns
those measured per-stage costs into what the partitioner needs, per-layer costs and per-rank
speeds (a :class:`LayerProfile`), and asks the partitioner for each placement's split (the V-aware
one for a V, the exact one-stage-per-rank one otherwise). The frame loop then moves the stages to
that split (``StageSet.moved_to``: parameters and AdamW state are keyed by parameter name, which
the split does not change, so training continues exactly) and saves the profile in every
snapshot, so a resumed run rebuilds the same split.

Separating a layer's cost from its rank's speed needs an assumption, because each stage was
measured on one rank only: **the layers are alike** (the built-in GPT's blocks are). A rank's
slowdown is then its measured seconds per layer over all its stages, relative to the fastest
rank, and a stage's reference cost is spread evenly over its layers (the embedding and the head
ride on the first and last stage's layers). For models with unlike layers pass the layer costs
yourself to :func:`~hyperframe_runtime.schedule.partition.vshape_partition`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from hyperframe_runtime.models.spec import ModelSpec, check_split
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import OpKind, Placement
from hyperframe_runtime.schedule.partition import partition_layers, vshape_partition

__all__ = [
    "PARTITION_FRAMES",
    "LayerProfile",
    "can_partition",
    "even_split",
    "layer_costs_and_speeds",
    "repartition",
    "split_spec",
]

PARTITION_FRAMES: Final = 4
"""Frames on the even split before a measured re-split: one warm-up frame (torch's shape
inference, first allocations) and three measured ones."""


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
    stage_seconds = [
        costs.base_cost(s, OpKind.F) + costs.base_cost(s, OpKind.B) for s in range(placement.num_stages)
    ]
    per_layer = []
    for rank in range(placement.num_ranks):
        stages = placement.stages_of(rank)
        layers = sum(boundaries[s + 1] - boundaries[s] for s in stages)
        per_layer.append(sum(stage_seconds[s] for s in stages) / layers)
    fastest = min(per_layer)
    slowdown = [x / fastest if fastest > 0 else 1.0 for x in per_layer]
    layer_costs = []
    for s in range(placement.num_stages):
        count = boundaries[s + 1] - boundaries[s]
        reference = stage_seconds[s] / slowdown[placement.rank_of(s)]
        layer_costs.extend([reference / count] * count)
    return layer_costs, slowdown


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
        if not can_partition(placement):
            return even_split(len(self.layer_costs), placement.num_stages)
        return repartition(placement, self.layer_costs, self.rank_slowdown)

    def to_json(self) -> dict[str, Any]:
        return {"layer_costs": list(self.layer_costs), "rank_slowdown": list(self.rank_slowdown)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LayerProfile:
        return cls(
            tuple(float(x) for x in data["layer_costs"]), tuple(float(x) for x in data["rank_slowdown"])
        )
