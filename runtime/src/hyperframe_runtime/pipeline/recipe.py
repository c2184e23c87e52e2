"""The training recipe: the optimizer, the learning-rate schedule and gradient clipping.

One module for what a frame does between the gradients and the step, used by the stages (which
build the optimizer over their parameters), the frame loop (which clips, sets the frame's
learning rate and steps) and the snapshots (which save the schedule's position and the RNG).

- :func:`build_optimizer`: AdamW (``betas``, decoupled ``weight_decay``) or SGD (``momentum``,
  ``weight_decay``) at the peak ``lr``;
- :class:`LrSchedule`: a pure function of the step (the frame index): linear warmup over
  ``warmup_frames``, then ``constant``, ``cosine`` or ``linear`` decay to ``min_lr`` at the last
  frame. :class:`LrScheduler` applies it to whatever optimizer the stages hold now (a re-split or a
  new placement builds a new optimizer; the schedule's position survives that);
- :func:`clip_grad_norm`: the global L2 norm over every parameter of the model. Each pipeline
  rank holds each parameter of its replica exactly once, and after the data-parallel all-reduce
  (``grad_sync.GradReducer``) every replica holds the same averaged gradients, so the sum of squares
  all-reduced over the pipeline group is the whole model's; every rank scales by the same factor;
- :func:`rng_state` / :func:`set_rng_state`: the global torch RNG (CPU and this rank's CUDA device)
  for the snapshots, so that a resumed run draws what the uninterrupted run would have.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import torch
import torch.distributed as dist

from hyperframe_runtime.config import TrainConfig

__all__ = [
    "LrSchedule",
    "LrScheduler",
    "build_optimizer",
    "clip_grad_norm",
    "grad_sq_norm",
    "rng_state",
    "set_rng_state",
]

_CLIP_EPS: Final = 1e-6
"""Added to the norm before dividing, as ``torch.nn.utils.clip_grad_norm_`` does."""


def build_optimizer(config: TrainConfig, params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """The optimizer ``config`` names over ``params``, at the peak learning rate."""
    plist = list(params)
    if config.optimizer == "sgd":
        return torch.optim.SGD(
            plist, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
        )
    return torch.optim.AdamW(plist, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)


@dataclass(frozen=True, slots=True, kw_only=True)
class LrSchedule:
    """Learning rate per step: warmup, then constant, cosine or linear decay to ``min_lr``."""

    kind: str
    peak: float
    min_lr: float
    warmup: int
    total: int
    """Steps in the whole run; the decay reaches ``min_lr`` at the last one (``total - 1``)."""

    @classmethod
    def of(cls, config: TrainConfig) -> LrSchedule:
        return cls(
            kind=config.lr_schedule,
            peak=config.lr,
            min_lr=config.min_lr,
            warmup=config.warmup_frames,
            total=config.frames,
        )

    def lr_at(self, step: int) -> float:
        """The learning rate of step ``step`` (0-based: the step that ends frame ``step + 1``)."""
        if step < self.warmup:
            return self.peak * (step + 1) / self.warmup
        if self.kind == "constant":
            return self.peak
        span = self.total - 1 - self.warmup
        progress = min(1.0, (step - self.warmup) / span) if span > 0 else 1.0
        if self.kind == "cosine":
            return self.min_lr + (self.peak - self.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.peak - (self.peak - self.min_lr) * progress


class LrScheduler:
    """The schedule's position (the next step) and its application to an optimizer."""

    def __init__(self, schedule: LrSchedule, step: int = 0) -> None:
        self.schedule = schedule
        self.step = step

    def apply(self, optimizer: torch.optim.Optimizer) -> float:
        """Set this step's learning rate on every parameter group of ``optimizer``; return it."""
        lr = self.schedule.lr_at(self.step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        return lr

    def advance(self) -> None:
        """After the optimizer step."""
        self.step += 1

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step, "schedule": _schedule_json(self.schedule)}

    def load_state_dict(self, state: Mapping[str, Any], *, expected_step: int) -> None:
        """Resume at ``state``'s step, which must be the snapshot's frames done (``expected_step``)."""
        step = int(state["step"])
        if step != expected_step:
            raise ValueError(
                f"snapshot: the learning-rate schedule is at step {step} but the snapshot has "
                f"{expected_step} frames done; the snapshot is inconsistent, resume from another one"
            )
        self.step = step


def _schedule_json(schedule: LrSchedule) -> dict[str, Any]:
    return {
        "kind": schedule.kind,
        "peak": schedule.peak,
        "min_lr": schedule.min_lr,
        "warmup": schedule.warmup,
        "total": schedule.total,
    }


def grad_sq_norm(params: Iterable[torch.nn.Parameter]) -> torch.Tensor:
    """Sum of the squared gradient entries of ``params`` (fp32, on their device; 0 without grads)."""
    squares = [p.grad.detach().float().pow(2).sum() for p in params if p.grad is not None]
    if not squares:
        return torch.zeros(())
    return torch.stack(squares).sum()


def clip_grad_norm(
    params: Iterable[torch.nn.Parameter],
    max_norm: float,
    pp_group: dist.ProcessGroup | None,
    device: torch.device,
    *,
    also_scale: Iterable[torch.nn.Parameter] = (),
) -> float:
    """Scale the gradients of ``params`` so that the model's global L2 norm is at most ``max_norm``;
    return the norm before clipping (collective over ``pp_group``; None = one rank holds the whole
    model; ``device`` is where this rank's collectives run). ``also_scale``: parameters scaled by
    the same factor but not counted in the norm (a tied weight's copies, ``pipeline.tied``). Call
    it after the data-parallel gradient average, before the optimizer step."""
    plist = [p for p in params if p.grad is not None]
    extra = [p for p in also_scale if p.grad is not None]
    local = grad_sq_norm(plist).to(device)
    if pp_group is not None and dist.get_world_size(pp_group) > 1:
        dist.all_reduce(local, op=dist.ReduceOp.SUM, group=pp_group)
    norm = float(local.sqrt())
    scale = max_norm / (norm + _CLIP_EPS)
    if scale < 1.0:
        for p in (*plist, *extra):
            assert p.grad is not None
            p.grad.mul_(scale)
    return norm


def rng_state(device: torch.device) -> dict[str, torch.Tensor]:
    """The global torch RNG state of this process (CPU, and ``device``'s if it is a CUDA device)."""
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: Mapping[str, torch.Tensor], device: torch.device) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)
