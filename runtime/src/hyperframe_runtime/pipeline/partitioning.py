"""Re-partition a model's layers from measured costs: the runtime half of ``schedule.partition``.

After the first frames of a run the planner holds measured per-stage costs (``FramePlan.costs``,
from every rank's op timings). This module turns them into what the partitioner needs, per-layer
costs and per-rank speeds, asks it for a split (the V-aware one for a V placement, the exact
one-stage-per-rank one otherwise) and builds the model spec that runs that split through the
per-layer hook (``ModelSpec.build_layers``).

Separating a layer's cost from its rank's speed needs an assumption, because each stage was
measured on one rank only: **the layers are alike** (the built-in GPT's blocks are). A rank's
slowdown is then its measured seconds per layer over all its stages, relative to the fastest
rank, and a stage's reference cost is spread evenly over its layers (the embedding and the head
ride on the first and last stage's layers). For models with unlike layers pass the layer costs
yourself to :func:`~hyperframe_runtime.schedule.partition.vshape_partition`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hyperframe_runtime.models.spec import ModelSpec, check_split
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import OpKind, Placement
from hyperframe_runtime.schedule.partition import partition_layers, vshape_partition

__all__ = ["layer_costs_and_speeds", "repartition", "split_spec"]


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
        sum(costs.base_cost(s, kind) for kind in (OpKind.F, OpKind.I, OpKind.W))
        for s in range(placement.num_stages)
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
    if placement.is_vshape or placement.num_ranks == 1:
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
