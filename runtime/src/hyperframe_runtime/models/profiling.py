"""Measure a stage's activation memory: the bytes one micro-batch keeps alive until its backward.

Autograd's saved tensors are what a micro-batch holds between its forward and its backward; the
stage output is held too (the pipeline keeps it to run the backward from the next stage's
gradient). Parameters are not activations and are left out. Each storage is counted once, so a
view saved twice costs its bytes once. This is what the planner's ``costs.activation`` should
be, in bytes per micro-batch, instead of one unit per stage.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["activation_bytes"]


def activation_bytes(module: nn.Module, *inputs: Any) -> int:
    """Bytes one forward of ``module`` on ``inputs`` (one micro-batch) keeps for its backward."""
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
    return sum(storages.values())
