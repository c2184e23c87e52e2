"""One rank's stages of one placement (modules, optimizer, executor), and moving them to another.

The hyperframe policy may measure schedules on other placements (one stage per rank for 1F1B,
a V for ZBV, looped for Interleaved1F1B). Parameters and optimizer state are keyed by parameter
name, and names are unique across stages (the ``ModelSpec`` contract), so moving to another
placement is: every pipeline rank all-gathers the named tensors of the pipeline, builds its new
stages and takes the tensors it now holds. Replicas move in lockstep, each in its own pipeline
group, and stay identical. This is a between-frames operation and costs one all-gather of the
pipeline's parameters and AdamW moments; the frame loop counts it as re-planning cost. A new
layer split (``layer_split = "measured"``, ``pipeline.partitioning``) moves the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.spec import ModelSpec
from hyperframe_runtime.pipeline.executor import PipelineExecutor
from hyperframe_runtime.pipeline.partitioning import LayerProfile, even_split
from hyperframe_runtime.pipeline.recipe import build_optimizer
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

    def named_state(self) -> dict[str, tuple[torch.Tensor, dict[str, Any]]]:
        """``{parameter name: (value, optimizer state)}`` of this rank's stages, on the CPU, and
        ``{buffer name: (value, {})}`` of their persistent buffers."""
        out: dict[str, tuple[torch.Tensor, dict[str, Any]]] = {}
        for module in self.modules.values():
            for name, buffer in _persistent_buffers(module):
                out[name] = (buffer.detach().cpu(), {})
            for name, param in module.named_parameters():
                state = self.optimizer.state.get(param, {})
                out[name] = (
                    param.detach().cpu(),
                    {k: v.detach().cpu() if isinstance(v, torch.Tensor) else v for k, v in state.items()},
                )
        return out

    def moved_to(self, context: StageContext, placement: Placement, orders: Orders) -> StageSet:
        """This pipeline's parameters and optimizer state on ``placement`` and the layer split of
        ``context`` (collective over the pipeline group; every pipeline rank calls it with the
        same placement and context).

        A pipeline's stages hold each parameter on exactly one rank, so a rank keeps what its new
        stages hold and sends only the rest: a re-split that moves two blocks sends two blocks'
        parameters and AdamW state, not the whole model."""
        pp_group = context.groups.pp_group
        # Every parameter is overwritten below: build the new stages without initialising (or
        # reloading) them where the model allows it.
        new = StageSet.build(context, placement, orders, empty=True)
        kept = {name for module in new.modules.values() for name, _ in _named_tensors(module)}
        mine = self.named_state()
        leaving = {name: entry for name, entry in mine.items() if name not in kept}
        gathered: list[dict[str, tuple[torch.Tensor, dict[str, Any]]] | None] = [None] * dist.get_world_size(
            pp_group
        )
        dist.all_gather_object(gathered, leaving, group=pp_group)
        merged = dict(mine)
        for part in gathered:
            merged.update(part or {})
        # A tied weight held under one name before may be held under another now (its copy).
        siblings = {name: tie.names for tie in context.spec.tied_parameters for name in tie.names}
        device = context.device
        with torch.no_grad():
            for module in new.modules.values():
                for name, buffer in _persistent_buffers(module):
                    if name in merged:
                        buffer.copy_(merged[name][0])
                for name, param in module.named_parameters():
                    key = next((k for k in (name, *siblings.get(name, ())) if k in merged), None)
                    if key is None:
                        raise RuntimeError(
                            f"parameter {name!r} of the new placement is held by no rank; stage "
                            "modules must name parameters the same for every stage count"
                        )
                    value, state = merged[key]
                    param.copy_(value)
                    if state:
                        new.optimizer.state[param] = {
                            k: v.to(device) if isinstance(v, torch.Tensor) and k != "step" else v
                            for k, v in state.items()
                        }
        return new


def _persistent_buffers(module: nn.Module) -> list[tuple[str, torch.Tensor]]:
    state = module.state_dict(keep_vars=True)
    return [(name, buffer) for name, buffer in module.named_buffers() if name in state]


def _named_tensors(module: nn.Module) -> list[tuple[str, torch.Tensor]]:
    return [*module.named_parameters(), *_persistent_buffers(module)]
