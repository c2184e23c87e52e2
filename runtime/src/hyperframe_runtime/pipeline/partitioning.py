"""Re-partition a model's layers from measured costs: the runtime half of ``schedule.partition``.

After the first frames of a run the planner holds measured per-stage costs (``FramePlan.costs``,
from every rank's op timings). This module turns them into what the partitioner needs, per-layer
costs and per-rank speeds, asks it for a split (the V-aware one for a V placement, the exact
one-stage-per-rank one otherwise) and builds the model spec that runs that split through the
per-layer hook (``ModelSpec.build_layers``). :func:`train_partitioned` is the whole flow: train
the first frames on the even split, re-plan from their measured costs, snapshot, partition, and
continue on the new split from the snapshot (parameters and AdamW state are keyed by parameter
name, which the split does not change, so the continuation is exact).

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

import torch

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.spec import ModelSpec, check_split
from hyperframe_runtime.pipeline.frame_loop import FrameLoop, TrainResult
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import OpKind, Placement
from hyperframe_runtime.schedule.partition import partition_layers, vshape_partition

__all__ = ["Partitioned", "layer_costs_and_speeds", "repartition", "split_spec", "train_partitioned"]


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


@dataclasses.dataclass(frozen=True)
class Partitioned:
    """What :func:`train_partitioned` did."""

    calibration: TrainResult
    """The frames on the even split."""
    partitioned: TrainResult
    """The frames after it, on ``split``."""
    split: tuple[int, ...]
    """Layer boundaries of the stages after calibration."""
    rank_slowdown: tuple[float, ...]
    """Each rank's measured time per layer, relative to the fastest."""


def train_partitioned(
    config: TrainConfig,
    spec: ModelSpec,
    *,
    calibration_frames: int,
    device: torch.device | None = None,
) -> Partitioned:
    """Train ``config`` with a layer split measured for this hardware (every rank calls it).

    The first ``calibration_frames`` frames run the even split and re-plan from measured costs
    every ``config.replan_every`` frames; then a snapshot is written to ``config.checkpoint_dir``,
    the measured per-stage costs choose the split, and training resumes from the snapshot on that
    split (re-planning again from its own measured costs) until ``config.frames``.
    """
    if not config.checkpoint_dir:
        raise ValueError(
            "checkpoint_dir: partitioned training hands the weights over through a snapshot; set it"
        )
    if not 1 <= config.replan_every < calibration_frames < config.frames:
        raise ValueError(
            f"calibration_frames = {calibration_frames}: must lie between replan_every "
            f"({config.replan_every}, which must be >= 1) and frames ({config.frames}), exclusive, so "
            "that costs are measured before the split changes"
        )
    num_stages = config.num_stages
    even = tuple(round(i * spec.num_layers / num_stages) for i in range(num_stages + 1))
    first = FrameLoop(
        dataclasses.replace(config, frames=calibration_frames), spec=split_spec(spec, even), device=device
    )
    calibration = first.run()
    measured = _measured_costs(first, num_stages)
    if measured is None:
        raise RuntimeError(
            "policy: partitioned training needs the hyperframe policy (it re-plans from measured costs)"
        )
    costs, placement = measured
    layer_costs, slowdown = layer_costs_and_speeds(costs, placement, even)
    split = repartition(placement, layer_costs, slowdown)
    rest = FrameLoop(config, spec=split_spec(spec, split), device=device).run()
    return Partitioned(calibration=calibration, partitioned=rest, split=split, rank_slowdown=tuple(slowdown))


def _measured_costs(loop: FrameLoop, num_stages: int) -> tuple[CostModel, Placement] | None:
    """Measured per-stage costs of the calibration frames: the plan's own when it was re-planned,
    else the schedule selector's calibration of a placement with ``num_stages`` stages (the
    current placement first)."""
    if loop.plan.costs is not None and loop.plan.placement.num_stages == num_stages:
        return loop.plan.costs, loop.plan.placement
    placements = sorted(loop.calibrations, key=lambda p: p != loop.plan.placement)
    for placement in placements:
        if placement.num_stages == num_stages:
            return loop.calibrations[placement].costs, placement
    return None
