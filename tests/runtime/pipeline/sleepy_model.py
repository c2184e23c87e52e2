"""A user model whose ops take a fixed wall time (they sleep), for the schedule-selection test.

Each stage is a linear layer whose forward and backward each sleep ``SLEEP_S``. Sleeping uses no
CPU, so how much a schedule overlaps the ranks' work shows in the wall time however loaded the
test machine is: a schedule that runs the micro-batches one after another is slower than 1F1B
by construction, not by a timing accident.
"""

from __future__ import annotations

import time
from typing import Any, Final

import torch
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models import ModelSpec
from torch import nn

SLEEP_S: Final = 0.004
WIDTH: Final = 8


class _Sleep(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        time.sleep(SLEEP_S)
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        time.sleep(SLEEP_S)
        return grad


class _Stage(nn.Module):
    def __init__(self, index: int) -> None:
        super().__init__()
        torch.manual_seed(100 + index)
        self.add_module(f"layer{index}", nn.Linear(WIDTH, WIDTH))
        self.index = index

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        layer: nn.Module = getattr(self, f"layer{self.index}")
        out: torch.Tensor = _Sleep.apply(layer(x))  # type: ignore[no-untyped-call]
        return out


def build(config: TrainConfig) -> ModelSpec:
    def build_stage(stage: int, num_stages: int) -> nn.Module:
        return _Stage(stage)

    def make_batch(frame: int, replica: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(frame * 1000 + replica)
        x = torch.randn(n, WIDTH, generator=g)
        return x, x.flip(1)

    return ModelSpec(
        build_stage=build_stage,
        loss_fn=lambda out, target: nn.functional.mse_loss(out, target),
        make_batch=make_batch,
    )
