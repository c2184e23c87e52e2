"""A user model factory with its own per-frame metrics: the built-in GPT plus ``frame_metrics``.

``frame_metrics`` returns ``MAX_PROGRESS_METRICS + EXTRA`` names, so a run shows both the user
metrics reaching TensorBoard and the bound dropping the last names in sorted order.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from hyperframe.constants import MAX_PROGRESS_METRICS
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models import ModelSpec
from hyperframe_runtime.models.gpt import gpt_model_spec

EXTRA: Final = 3


def user_metrics(frames_done: int) -> dict[str, float]:
    """``m00`` .. ``m66``: ``m<i>`` is ``frames_done + i``."""
    return {f"m{i:02d}": float(frames_done + i) for i in range(MAX_PROGRESS_METRICS + EXTRA)}


def metered_spec(config: TrainConfig) -> ModelSpec:
    return replace(gpt_model_spec(config), frame_metrics=user_metrics)
