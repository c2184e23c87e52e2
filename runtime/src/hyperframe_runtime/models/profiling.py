"""Measure a stage's activation memory: the bytes one micro-batch keeps alive until its backward.

Autograd's saved tensors are what a micro-batch holds between its forward and its backward; the
stage output is held too (the pipeline keeps it to run the backward from the next stage's
gradient). Parameters are not activations and are left out. Each storage is counted once, so a
view saved twice costs its bytes once. This is what the planner's ``costs.activation`` should
be, in bytes per micro-batch, instead of one unit per stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from hyperframe_runtime.models.spec import ModelSpec

__all__ = ["activation_bytes", "stage_activation_bytes"]


def activation_bytes(module: nn.Module, *inputs: Any) -> int:
    """Bytes one forward of ``module`` on ``inputs`` (one micro-batch) keeps for its backward."""
    return _measure(module, *inputs)[0]


def stage_activation_bytes(
    spec: ModelSpec, num_stages: int, micro_batch_size: int, boundaries: Sequence[int] | None = None
) -> list[int]:
    """Each stage's activation bytes per micro-batch of ``micro_batch_size`` samples: the stages
    are built on the CPU (``boundaries``: an uneven split through the per-layer hook) and one
    micro-batch of frame 0 is passed through them in turn. For ``costs.activation``, with the
    planner's ``memory_limit`` then in bytes."""
    inputs, _ = spec.make_batch(0, 0, micro_batch_size)
    x: Any = inputs
    sizes = []
    for stage in range(num_stages):
        module = (
            spec.build_split(stage, boundaries)
            if boundaries is not None
            else spec.build_stage(stage, num_stages)
        )
        if stage > 0:
            x = tuple(_as_input(t) for t in x) if isinstance(x, tuple) else _as_input(x)
        size, x = _measure(module, *(x if isinstance(x, tuple) else (x,)))
        sizes.append(size)
    return sizes


def _as_input(t: Any) -> Any:
    # What the next stage receives: a leaf that needs a gradient when it is a float tensor.
    if isinstance(t, torch.Tensor):
        return t.detach().requires_grad_(t.is_floating_point())
    return t


def _measure(module: nn.Module, *inputs: Any) -> tuple[int, Any]:
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    storages: dict[int, int] = {}

    def count(t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in params:
            storages[ptr] = max(storages.get(ptr, 0), storage.nbytes())

    def pack(t: torch.Tensor) -> torch.Tensor:
        count(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = module(*inputs)
    for t in out if isinstance(out, tuple) else (out,):
        if isinstance(t, torch.Tensor):
            count(t)
    return sum(storages.values()), out
