"""Tied weights across pipeline stages (``ModelSpec.tied_parameters``): one weight, several copies.

GPT-2 uses its token embedding as the output head. When the embedding is on the first stage and
the head on the last, each stage holds a copy of the weight. As Megatron-LM does for its
embedding group, the copies' gradients are summed over the pipeline after every frame's
backward (after the data-parallel average), so every copy receives the gradient of the one tied
weight, the optimizer takes the same step on each, and they stay equal. For the global-norm
clipping the weight counts once: its owner's name, which some stage always holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torch.distributed as dist
from torch import nn

from hyperframe_runtime.models.spec import TiedWeight

__all__ = ["norm_params", "sum_tied_grads"]


def _held(modules: Mapping[int, nn.Module], names: Sequence[str]) -> list[nn.Parameter]:
    """This rank's distinct parameters among ``names`` (a tied pair on one stage is one)."""
    out: dict[int, nn.Parameter] = {}
    for module in modules.values():
        for name, param in module.named_parameters(remove_duplicate=False):
            if name in names:
                out.setdefault(id(param), param)
    return list(out.values())


def sum_tied_grads(
    modules: Mapping[int, nn.Module],
    tied: Sequence[TiedWeight],
    pp_group: dist.ProcessGroup | None,
    device: torch.device,
) -> None:
    """Give every copy of each tied weight the sum of all copies' gradients (collective over
    ``pp_group``: every pipeline rank calls it, holding a copy or not)."""
    spread = pp_group is not None and dist.get_world_size(pp_group) > 1
    for tie in tied:
        copies = _held(modules, tie.names)
        if not spread and len(copies) < 2:
            continue
        total = torch.zeros(tie.shape, device=device)
        for param in copies:
            if param.grad is not None:
                total += param.grad.float()
        if spread:
            dist.all_reduce(total, op=dist.ReduceOp.SUM, group=pp_group)
        for param in copies:
            param.grad = total.to(param.dtype).clone() if len(copies) > 1 else total.to(param.dtype)


def norm_params(
    modules: Mapping[int, nn.Module], tied: Sequence[TiedWeight]
) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """This rank's parameters split for the global-norm clipping: those counted in the norm, and
    the tied copies that are scaled with them but not counted (the owner's name counts)."""
    copies = {name for tie in tied for name in tie.names[1:]}
    counted: dict[int, nn.Parameter] = {}
    extra: dict[int, nn.Parameter] = {}
    for module in modules.values():
        for name, param in module.named_parameters():
            (extra if name in copies else counted).setdefault(id(param), param)
    return list(counted.values()), [p for k, p in extra.items() if k not in counted]
