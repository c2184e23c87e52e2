"""Single-process references for the multi-process pipeline tests, and the harness launcher.

The reference runs the same stages in one process, in order, without any pipelining: the
gradient of one frame is the mean-loss gradient over every micro-batch of every replica, and
training is plain AdamW on that. The built-in GPT is seeded per layer, so the unsplit model is the
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


def reference_losses(config: TrainConfig) -> list[float]:
    """Per-frame mean losses of ``config.frames`` frames of unpipelined AdamW training."""
    spec = gpt_model_spec(config)
    (model,) = _stages(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
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
        optimizer.step()
        losses.append(total)
    return losses
