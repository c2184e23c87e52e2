"""The training recipe (``pipeline.recipe``): optimizer, learning-rate schedule, global-norm clipping.

Unit tests pin the schedule's values and compare it with torch's own schedulers; the optimizer is
built with the configured hyperparameters. On two real gloo pipeline ranks the clipped global norm
and gradients equal the unpipelined model's (``torch.nn.utils.clip_grad_norm_``), training with
warmup, cosine decay and clipping matches the unpipelined reference, and a run resumed from a
snapshot reproduces the uninterrupted run's losses exactly. On one rank, a resume restores the
torch RNG.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.pipeline.frame_loop import FrameLoop
from hyperframe_runtime.pipeline.recipe import LrSchedule, build_optimizer
from pipeline_reference import (
    reference_grads,
    reference_losses,
    reference_optimizer,
    reference_scheduler,
    run_harness,
)

TOLERANCE = 1e-5


# ---- schedule values ------------------------------------------------------------------------------


def _schedule(kind: str) -> LrSchedule:
    return LrSchedule.of(TrainConfig(frames=10, lr=1.0, min_lr=0.1, warmup_frames=1, lr_schedule=kind))


def test_warmup_rises_linearly_to_the_peak() -> None:
    schedule = LrSchedule.of(TrainConfig(frames=10, lr=0.8, warmup_frames=4, lr_schedule="cosine"))
    assert [schedule.lr_at(i) for i in range(5)] == pytest.approx([0.2, 0.4, 0.6, 0.8, 0.8])


def test_cosine_decays_from_the_peak_to_min_lr_at_the_last_frame() -> None:
    s = _schedule("cosine")  # decay over steps 1..9: progress (step - 1) / 8
    assert s.lr_at(1) == pytest.approx(1.0)
    assert s.lr_at(3) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi / 4)))
    assert s.lr_at(5) == pytest.approx(0.55)
    assert s.lr_at(9) == pytest.approx(0.1)


def test_linear_decays_from_the_peak_to_min_lr_at_the_last_frame() -> None:
    s = _schedule("linear")
    assert [s.lr_at(i) for i in (1, 3, 5, 9)] == pytest.approx([1.0, 0.775, 0.55, 0.1])


def test_constant_keeps_the_peak_after_warmup() -> None:
    s = _schedule("constant")
    assert [s.lr_at(i) for i in range(10)] == pytest.approx([1.0] * 10)


@pytest.mark.parametrize("kind", ["constant", "cosine", "linear"])
@pytest.mark.parametrize("warmup", [0, 1, 3])
def test_schedule_equals_torchs_schedulers(kind: str, warmup: int) -> None:
    config = TrainConfig(frames=12, lr=2e-3, min_lr=2e-4, warmup_frames=warmup, lr_schedule=kind)
    optimizer = reference_optimizer(config, [torch.nn.Parameter(torch.zeros(1))])
    scheduler = reference_scheduler(config, optimizer)
    torch_lrs = []
    for _ in range(config.frames):
        torch_lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    schedule = LrSchedule.of(config)
    assert [schedule.lr_at(i) for i in range(config.frames)] == pytest.approx(torch_lrs, rel=1e-9)


# ---- optimizer and validation ------------------------------------------------------------------


def test_adamw_gets_betas_and_weight_decay() -> None:
    config = TrainConfig(lr=3e-4, betas=(0.8, 0.95), weight_decay=0.1)
    optimizer = build_optimizer(config, [torch.nn.Parameter(torch.zeros(2))])
    assert isinstance(optimizer, torch.optim.AdamW)
    group = optimizer.param_groups[0]
    assert (group["lr"], group["betas"], group["weight_decay"]) == (3e-4, (0.8, 0.95), 0.1)


def test_sgd_gets_momentum_and_weight_decay() -> None:
    config = TrainConfig(optimizer="sgd", lr=0.1, momentum=0.9, weight_decay=1e-4)
    optimizer = build_optimizer(config, [torch.nn.Parameter(torch.zeros(2))])
    assert isinstance(optimizer, torch.optim.SGD)
    group = optimizer.param_groups[0]
    assert (group["lr"], group["momentum"], group["weight_decay"]) == (0.1, 0.9, 1e-4)


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"lr": 0.0}, "lr:"),
        ({"warmup_frames": 11}, "warmup_frames:"),
        ({"min_lr": 0.01, "lr": 0.001}, "min_lr:"),
        ({"betas": [0.9, 1.0]}, "betas[1]:"),
        ({"momentum": 1.0}, "momentum:"),
        ({"grad_clip_norm": -1.0}, "grad_clip_norm:"),
        ({"precision": "bf16"}, "precision:"),
        ({"optimizer": "lion"}, "optimizer:"),
        ({"lr_schedule": "step"}, "lr_schedule:"),
        ({"betas": ["a", 0.9]}, "betas[0]:"),
    ],
)
def test_bad_recipe_fields_name_the_field(fields: dict[str, Any], path: str) -> None:
    with pytest.raises(ValueError) as info:
        TrainConfig.from_dict({"frames": 10, **fields})
    assert str(info.value).startswith(path), str(info.value)


def test_the_recipe_round_trips_through_json() -> None:
    config = TrainConfig(betas=(0.9, 0.95), lr_schedule="cosine", warmup_frames=2, model_args={"k": [1, 2]})
    assert TrainConfig.from_json(config.to_json()) == config


# ---- on two gloo pipeline ranks ------------------------------------------------------------------


def _config(checkpoint_dir: Path | None = None, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "vocab_size": 64,
        "seq_len": 16,
        "d_model": 32,
        "n_heads": 2,
        "n_layers": 4,
        "pipeline": 2,
        "policy": "hyperframe",
        "microbatches_per_frame": 4,
        "micro_batch_size": 2,
        "frames": 5,
        "replan_every": 0,
        "planner_time_budget_s": 0.02,
        "seed": 3,
        **extra,
    }
    if checkpoint_dir is not None:
        config.update(checkpoint_dir=str(checkpoint_dir), checkpoint_every=1, checkpoint_keep=0)
    return config


@pytest.mark.slow
def test_global_norm_clipping_and_a_resumed_warmup_cosine_run_on_two_ranks(tmp_path: Path) -> None:
    recipe = {
        "lr": 3e-3,
        "lr_schedule": "cosine",
        "warmup_frames": 2,
        "min_lr": 3e-4,
        "betas": [0.9, 0.95],
        "weight_decay": 0.05,
        "grad_clip_norm": 0.5,
    }
    clip = _config()
    full = _config(tmp_path / "full", **recipe)
    resumed = _config(tmp_path / "resumed", **recipe)
    run_harness(
        2,
        [
            {"kind": "clip", "name": "clip", "config": clip, "max_norm": 0.05},
            {"kind": "train", "name": "full", "config": full},
            {
                "kind": "train",
                "name": "resumed",
                "config": resumed,
                "copy_snapshot": str(tmp_path / "full" / "frame-000002"),
            },
        ],
        tmp_path,
    )

    # Clipping: every pipeline rank computes the whole model's norm, and the clipped gradients are
    # the unpipelined model's clipped by torch.
    grads, _ = reference_grads(TrainConfig.from_dict(clip))
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads.values()]
    for param, grad in zip(params, grads.values(), strict=True):
        param.grad = grad.clone()
    norm = float(torch.nn.utils.clip_grad_norm_(params, 0.05))
    assert norm > 0.05, "the test must clip: lower max_norm"
    got = torch.load(tmp_path / "clip.pt")
    assert got["norms"] == pytest.approx([norm, norm], rel=1e-5)
    assert set(got["grads"]) == set(grads)
    for (name, ref), param in zip(grads.items(), params, strict=True):
        assert ref.shape == param.grad.shape  # type: ignore[union-attr]
        torch.testing.assert_close(got["grads"][name], param.grad, rtol=1e-4, atol=1e-7)

    # Training with warmup, cosine decay and clipping equals the unpipelined reference ...
    a = json.loads((tmp_path / "full.json").read_text())
    assert a["losses"] == pytest.approx(reference_losses(TrainConfig.from_dict(full)), abs=TOLERANCE)
    # ... and the run resumed after frame 2 continues it exactly (schedule position, optimizer).
    b = json.loads((tmp_path / "resumed.json").read_text())
    assert b["start"] == 2
    assert b["losses"] == a["losses"][2:]


def test_resume_restores_the_torch_rng(tmp_path: Path, one_rank_group: None) -> None:
    config = TrainConfig.from_dict(
        {**_config(tmp_path / "ckpt", frames=1), "pipeline": 1, "stages_per_rank": 1, "policy": "gpipe"}
    )
    first = FrameLoop(config)
    first.run_frame()
    torch.rand(7)  # the frame's draws (a model with dropout): the RNG is not where the seed put it
    first.after_frame()  # the snapshot after frame 1
    first.close()
    expected = torch.rand(4)
    torch.manual_seed(12345)  # what a fresh process does before resuming
    resumed = FrameLoop(config)
    assert resumed.frames_done == 1
    assert torch.equal(torch.rand(4), expected)
    resumed.close()
