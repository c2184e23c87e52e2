"""Single-process references for the multi-process pipeline tests, and the harness launcher.

The reference runs the same stages in one process, in order, without any pipelining: the
gradient of one frame is the mean-loss gradient over every micro-batch of every replica, and
training is the config's optimizer, schedule and clipping on that, built from torch directly. The built-in GPT is seeded per layer, so the unsplit model is the
same whatever the pipeline split.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.gpt import gpt_model_spec

HARNESS = Path(__file__).with_name("harness.py")
HARNESS_TIMEOUT_S = 840  # under the 900 s pytest timeout; a loaded 2-core CI box is slow


def run_harness(world: int, cases: list[dict[str, Any]], out: Path) -> None:
    """Run ``cases`` on ``world`` spawned gloo ranks; fail with the ranks' output on error."""
    spec = out / "cases.json"
    spec.write_text(json.dumps({"world": world, "cases": cases}), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(HARNESS), str(spec), str(out)],
        capture_output=True,
        text=True,
        timeout=HARNESS_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(f"harness failed (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr[-8000:]}")


def _stages(config: TrainConfig) -> list[torch.nn.Module]:
    spec = gpt_model_spec(config)
    return [spec.build_stage(0, 1)]


def reference_grads(config: TrainConfig) -> tuple[dict[str, torch.Tensor], float]:
    """Gradients and mean loss of frame 0 of ``config``, computed without pipelining."""
    spec = gpt_model_spec(config)
    (model,) = _stages(config)
    m, dp = config.microbatches_per_frame, config.data
    total = 0.0
    for replica in range(dp):
        inputs, targets = spec.make_batch(0, replica, m * config.micro_batch_size)
        for x, y in zip(inputs.chunk(m), targets.chunk(m), strict=True):
            loss = spec.loss_fn(model(x), y) / (m * dp)
            loss.backward()
            total += float(loss.detach())
    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    return grads, total


def reference_optimizer(config: TrainConfig, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """``config``'s optimizer built with torch directly (not through the runtime's recipe)."""
    if config.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
        )
    return torch.optim.AdamW(params, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)


def reference_scheduler(
    config: TrainConfig, optimizer: torch.optim.Optimizer
) -> torch.optim.lr_scheduler.LRScheduler:
    """``config``'s learning-rate schedule from torch's own schedulers: LinearLR warmup from
    ``lr / warmup_frames`` to ``lr``, then CosineAnnealingLR or LinearLR down to ``min_lr`` at the last
    frame (or constant)."""
    sched = torch.optim.lr_scheduler
    w, decay = config.warmup_frames, config.frames - 1 - config.warmup_frames
    if config.lr_schedule == "cosine" and decay > 0:
        after: sched.LRScheduler = sched.CosineAnnealingLR(optimizer, T_max=decay, eta_min=config.min_lr)
    elif config.lr_schedule == "linear" and decay > 0:
        after = sched.LinearLR(optimizer, 1.0, config.min_lr / config.lr, total_iters=decay)
    else:
        after = sched.ConstantLR(optimizer, factor=1.0, total_iters=0)
    if w == 0:
        return after
    warm: sched.LRScheduler = (
        sched.LinearLR(optimizer, start_factor=1 / w, end_factor=1.0, total_iters=w - 1)
        if w > 1
        else sched.ConstantLR(optimizer, factor=1.0, total_iters=0)
    )
    return sched.SequentialLR(optimizer, [warm, after], milestones=[w])


def reference_losses(config: TrainConfig) -> list[float]:
    """Per-frame mean losses of ``config.frames`` frames of unpipelined training with ``config``'s
    optimizer, schedule and global-norm clipping (torch's ``clip_grad_norm_``)."""
    spec = gpt_model_spec(config)
    (model,) = _stages(config)
    optimizer = reference_optimizer(config, list(model.parameters()))
    scheduler = reference_scheduler(config, optimizer)
    m, dp = config.microbatches_per_frame, config.data
    losses = []
    for frame in range(config.frames):
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for replica in range(dp):
            inputs, targets = spec.make_batch(frame, replica, m * config.micro_batch_size)
            for x, y in zip(inputs.chunk(m), targets.chunk(m), strict=True):
                loss = spec.loss_fn(model(x), y) / (m * dp)
                loss.backward()
                total += float(loss.detach())
        if config.grad_clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip_norm)
        optimizer.step()
        scheduler.step()
        losses.append(total)
    return losses
