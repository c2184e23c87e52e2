"""One rank's stages of one placement (modules, optimizer, executor), and moving them to another.

The hyperframe policy may measure schedules on other placements (one stage per rank for 1F1B,
a V for ZBV, looped for Interleaved1F1B). Parameters and optimizer state are keyed by parameter
name, and names are unique across stages (the ``ModelSpec`` contract), so moving to another
placement is: every pipeline rank builds its new stages, keeps what it still holds and receives
the rest tensor by tensor from its old holder (``pipeline.stage_move``: point-to-point, in
bounded buckets, nothing pickled). Replicas move in lockstep, each in its own pipeline group,
and stay identical. This is a between-frames operation; the frame loop counts it as re-planning
cost. A new
layer split (``layer_split = "measured"``, ``pipeline.partitioning``) moves the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.spec import ModelSpec
from hyperframe_runtime.pipeline.executor import PipelineExecutor
from hyperframe_runtime.pipeline.partitioning import LayerProfile, even_split
from hyperframe_runtime.pipeline.recipe import build_optimizer
from hyperframe_runtime.pipeline.stage_move import move_state
from hyperframe_runtime.pipeline.topology import ParallelGroups
from hyperframe_runtime.schedule.ir import Orders, Placement

__all__ = ["StageContext", "StageSet"]


@dataclass(frozen=True)
class StageContext:
    """What building this rank's stages needs besides the placement and the order."""

    config: TrainConfig
    spec: ModelSpec
    pp_rank: int
    groups: ParallelGroups
    device: torch.device
    profile: LayerProfile | None = None
    """Measured per-layer costs and rank speeds (``layer_split = "measured"``), once known: the
    stages then hold the partitioner's split of the layers."""

    def boundaries(self, placement: Placement) -> tuple[int, ...] | None:
        """The layer split of ``placement``'s stages; None = the model's own even ``build_stage``."""
        spec, num_stages = self.spec, placement.num_stages
        if not spec.has_layer_hook:
            return None
        if self.profile is not None:
            return self.profile.split_for(placement)
        if spec.num_layers % num_stages:
            return even_split(spec.num_layers, num_stages)
        return None

    def build_stages(
        self, placement: Placement, *, empty: bool = False
    ) -> tuple[tuple[int, ...] | None, dict[int, nn.Module]]:
        """This rank's stages of ``placement`` on the CPU, and the layer split they hold (the
        split is computed once: with a measured profile it is the partitioner's answer).
        ``empty``: parameters allocated but not initialised where the model can build them so
        (``ModelSpec.build_empty_layers``), for a stage move that overwrites them all."""
        cuts = self.boundaries(placement)
        stages = placement.stages_of(self.pp_rank)
        n = placement.num_stages
        empty_build = self.spec.build_empty_layers if empty else None
        if cuts is None and empty_build is None:
            return None, {s: self.spec.build_stage(s, n) for s in stages}
        split = cuts or even_split(self.spec.num_layers, n)
        self.spec.check_split(split)
        build = empty_build or self.spec.build_layers
        assert build is not None
        return cuts, {s: build(s, n, range(split[s], split[s + 1])) for s in stages}


@dataclass
class StageSet:
    """The stages ``placement`` gives this rank, their optimizer and the executor running them."""

    placement: Placement
    modules: dict[int, nn.Module]
    optimizer: torch.optim.Optimizer
    executor: PipelineExecutor
    boundaries: tuple[int, ...] | None = None
    """The layer split the stages hold; None = the model's own ``build_stage``."""

    @classmethod
    def build(
        cls, context: StageContext, placement: Placement, orders: Orders, *, empty: bool = False
    ) -> StageSet:
        """``empty``: see :meth:`StageContext.build_stages`."""
        config, device = context.config, context.device
        cuts, built = context.build_stages(placement, empty=empty)
        modules = {s: module.to(device) for s, module in built.items()}
        optimizer = build_optimizer(config, (p for m in modules.values() for p in m.parameters()))
        executor = PipelineExecutor(
            stage_modules=modules,
            num_stages=placement.num_stages,
            num_microbatches=config.microbatches_per_frame,
            loss_fn=context.spec.loss_fn,
            pp_group=context.groups.pp_group,
            dp_group=context.groups.dp_group,
            dp_size=config.data,
            device=device,
            orders=orders,
            bf16=config.bf16_autocast,
        )
        return cls(placement, modules, optimizer, executor, cuts)

    def moved_to(self, context: StageContext, placement: Placement, orders: Orders) -> StageSet:
        """This pipeline's parameters and optimizer state on ``placement`` and the layer split of
        ``context`` (collective over the pipeline group; every pipeline rank calls it with the
        same placement and context).

        A pipeline's stages hold each parameter on exactly one rank, so a rank keeps what its new
        stages hold and sends only the rest: a re-split that moves two blocks sends two blocks'
        parameters and AdamW state, not the whole model."""
        # Every tensor is overwritten by the move: build the new stages without initialising (or
        # reloading) them where the model allows it.
        new = StageSet.build(context, placement, orders, empty=True)
        siblings = {name: tie.names for tie in context.spec.tied_parameters for name in tie.names}
        move_state(
            self.modules,
            self.optimizer,
            new.modules,
            new.optimizer,
            pp_group=context.groups.pp_group,
            tied=siblings,
        )
        return new
