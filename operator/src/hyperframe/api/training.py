"""spec.training of a HyperFrameJob: the recipe (optimizer, learning-rate schedule, clipping, seed,
activation checkpointing, precision).

Each field maps one to one onto the runtime's training config (``hyperframe-launch`` does the
mapping; the runtime's ``pipeline.recipe`` runs it). Rules that need other parts of the spec
(the warmup against ``frames.frames``, bf16 against ``gpusPerNode``) are :data:`TRAINING_JOB_RULES`,
checked on the job spec.
"""

# spec_field() returns dataclasses.field(...) with metadata; ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final, Literal

from hyperframe.api.fields import Rule, spec_field

__all__ = ["TRAINING_JOB_RULES", "LrScheduleKind", "OptimizerName", "Precision", "Training"]

OptimizerName = Literal["adamw", "sgd"]
LrScheduleKind = Literal["constant", "cosine", "linear"]
Precision = Literal["auto", "fp32", "bf16"]

_LR = "lr (%s) must be greater than 0"
_MIN_LR = "minLr (%s) is above lr (%s)"
_BETAS = "betas must be two numbers in [0, 1)"
_MOMENTUM = "momentum (%s) must be below 1"
_WARMUP = "training.warmupFrames (%d) is more than frames.frames (%d)"
_BF16 = "training.precision bf16 runs on GPUs, but gpusPerNode is 0"


@dataclass(frozen=True, slots=True, kw_only=True)
class Training:
    """The training recipe; every field has a default, so the whole section is optional.

    The rules guard with ``has()``: the API server checks them against the schema default ``{}``
    too, before nested defaults apply (on a stored job every field is set)."""

    __rules__: ClassVar[tuple[Rule, ...]] = (
        Rule(
            cel="!has(self.lr) || self.lr > 0.0",
            message="lr must be greater than 0",
            message_format=_LR,
            message_args=("string(self.lr)",),
            fix="set a positive learning rate, e.g. 0.0003",
            field_path=".lr",
        ),
        Rule(
            cel="!has(self.minLr) || !has(self.lr) || self.minLr <= self.lr",
            message="minLr is above lr",
            message_format=_MIN_LR,
            message_args=("string(self.minLr)", "string(self.lr)"),
            fix="set minLr at most lr (the schedule decays from lr to minLr)",
            field_path=".minLr",
        ),
        Rule(
            cel="!has(self.betas) || self.betas.all(b, b >= 0.0 && b < 1.0)",
            message=_BETAS,
            fix="use e.g. [0.9, 0.95]",
            field_path=".betas",
        ),
        Rule(
            cel="!has(self.momentum) || self.momentum < 1.0",
            message="momentum must be below 1",
            message_format=_MOMENTUM,
            message_args=("string(self.momentum)",),
            fix="use a momentum in [0, 1), e.g. 0.9",
            field_path=".momentum",
        ),
    )

    optimizer: OptimizerName = spec_field(
        "adamw (torch.optim.AdamW: betas, decoupled weightDecay) or sgd (torch.optim.SGD: momentum, "
        "weightDecay).",
        default="adamw",
    )
    lr: float = spec_field(
        "Peak learning rate (after warmup; throughout with the constant schedule); > 0.", default=0.001
    )
    betas: tuple[float, ...] = spec_field(
        "AdamW's two moment decay rates, each in [0, 1).", default=(0.9, 0.999), min_items=2, max_items=2
    )
    momentum: float = spec_field("SGD momentum, in [0, 1).", default=0.0, minimum=0)
    weight_decay: float = spec_field("Weight decay (AdamW: decoupled).", default=0.01, minimum=0)
    schedule: LrScheduleKind = spec_field(
        "Learning rate after warmup: constant (lr), or cosine or linear decay from lr to minLr at the "
        "last frame.",
        default="constant",
    )
    warmup_frames: int = spec_field(
        "Frames of linear warmup: frame i (from 0) of the warmup steps with lr x (i + 1) / "
        "warmupFrames; at most frames.frames.",
        default=0,
        minimum=0,
        maximum=100000000,
    )
    min_lr: float = spec_field("Learning rate the decay ends at; at most lr.", default=0.0, minimum=0)
    grad_clip_norm: float = spec_field(
        "Clip the gradients to this global L2 norm (over every pipeline stage, after the data-parallel "
        "average) before each step; 0 = no clipping.",
        default=0.0,
        minimum=0,
    )
    seed: int = spec_field(
        "Seed of the weights, the synthetic data and the torch RNG (the same on every rank).",
        default=0,
        minimum=0,
        maximum=2**31 - 1,
    )
    activation_checkpointing: bool = spec_field(
        "Recompute each transformer block's activations in the backward instead of keeping them "
        "(torch.utils.checkpoint; the built-in models): less activation memory for about one more "
        "forward.",
        default=False,
    )
    precision: Precision = spec_field(
        "fp32, or bf16 autocast (GPU jobs only; LayerNorm and the loss stay fp32); auto = bf16 on "
        "GPUs, fp32 on CPUs.",
        default="auto",
    )


TRAINING_JOB_RULES: Final[tuple[Rule, ...]] = (
    Rule(
        cel="!has(self.training) || !has(self.frames) || self.training.warmupFrames <= self.frames.frames",
        message="training.warmupFrames is more than frames.frames",
        message_format=_WARMUP,
        message_args=("self.training.warmupFrames", "self.frames.frames"),
        fix="shorten the warmup or train more frames",
        field_path=".training.warmupFrames",
    ),
    Rule(
        cel="!has(self.training) || self.training.precision != 'bf16' || self.gpusPerNode > 0",
        message=_BF16,
        fix="use precision fp32 (or auto) for a CPU job",
        field_path=".training.precision",
    ),
)
"""Rules of spec.training that read other parts of the job spec."""
