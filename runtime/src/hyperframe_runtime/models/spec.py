"""The interface between a model and the HyperFrame runtime.

A model is handed to the runtime as a :class:`ModelSpec`: how to build each pipeline stage, the loss
of one micro-batch, and the data of one frame. The built-in GPT (``models.gpt``) is one such spec; a
user's own model is another, named in the training config as ``model = "package.module:function"``
where ``function(config: TrainConfig) -> ModelSpec``. See docs/runtime.md for a worked example.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from hyperframe_runtime.config import TrainConfig

__all__ = ["ModelSpec", "load_model_spec"]


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A model split into pipeline stages, with its loss and data."""

    build_stage: Callable[[int, int], nn.Module]
    """``(stage_index, num_stages) -> module`` of that stage, on the CPU in fp32. It must be
    deterministic (every data-parallel replica builds the same weights) and must not touch the
    global RNG in a way that depends on which stages a rank builds. Stage ``s`` receives the
    output of stage ``s - 1`` as its positional arguments (a tensor or a tuple of tensors); stage 0
    receives the model inputs. Parameter names must be unique across stages (the built-in GPT
    uses global layer indices): checkpoints are keyed by them."""
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    """``(last-stage output of one micro-batch, its targets) -> scalar loss``, the mean over the
    micro-batch. The runtime averages it over the micro-batches of a frame and over data-parallel
    replicas, so one frame equals one step on the whole frame batch. Computed in fp32."""
    make_batch: Callable[[int, int, int], tuple[torch.Tensor, torch.Tensor]]
    """``(frame, replica, num_samples) -> (inputs, targets)``: the samples of one frame for one
    data-parallel replica, batch dimension first. It must depend only on its arguments, so that a
    resumed run sees the same data as an uninterrupted one."""
    tokens_per_sample: int = 0
    """Tokens in one sample, for the tokens/s metric; 0 when the model has no tokens."""


def load_model_spec(config: TrainConfig) -> ModelSpec:
    """The spec ``config.model`` names: the built-in GPT or a user factory ``module:function``."""
    if config.model == "gpt":
        from hyperframe_runtime.models.gpt import gpt_model_spec

        return gpt_model_spec(config)
    module_name, _, attr = config.model.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"model: cannot import {module_name!r} ({exc}); install the package or fix the name"
        ) from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ValueError(f"model: {module_name!r} has no callable {attr!r}; expected a ModelSpec factory")
    spec = factory(config)
    if not isinstance(spec, ModelSpec):
        raise ValueError(
            f"model: {config.model}(config) returned {type(spec).__name__}, expected "
            "hyperframe_runtime.models.ModelSpec"
        )
    return spec
