"""The data path in the frame loop, on real gloo ranks: a run killed after frame k and resumed
from that snapshot reads the same next samples (the loader's saved position) and gives the same
losses as the uninterrupted run, with DataLoader workers, for token shards (on a 2-rank pipeline)
and for a user Dataset factory (on 2 data-parallel replicas); and the data time is inside the
frame time."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from data_factory import SLOW_ITEM_S
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.data.prepare import prepare_bytes
from hyperframe_runtime.models.gpt import gpt_model_spec
from hyperframe_runtime.pipeline.frame_loop import FrameLoop
from pipeline_reference import run_harness

KILLED_AFTER = 2
FRAMES = 5
MAKE_BATCH_S = 0.5


def _config(checkpoint_dir: Path, **data: Any) -> dict[str, Any]:
    return {
        "vocab_size": 256,
        "seq_len": 16,
        "d_model": 32,
        "n_heads": 2,
        "n_layers": 2,
        "policy": "1f1b",
        "microbatches_per_frame": 4,
        "micro_batch_size": 2,
        "frames": FRAMES,
        "checkpoint_dir": str(checkpoint_dir),
        "checkpoint_every": 1,
        "checkpoint_keep": 0,  # keep every snapshot: the resume copies an early one
        "lr": 3e-3,
        "seed": 7,
        "data_workers": 2,
        **data,
    }


@pytest.mark.slow
def test_a_resumed_run_reads_the_same_next_samples_and_gives_the_same_losses(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    prepare_bytes([Path(__file__)], shards, shard_tokens=1000)  # this file's bytes, several shards
    sources = {
        "shards": {"data_shards": str(shards), "pipeline": 2},
        "factory": {"data_factory": "data_factory:tokens", "data": 2},
    }
    cases: list[dict[str, Any]] = []
    for name, data in sources.items():
        cases.append(
            {"kind": "train", "name": f"{name}-full", "config": _config(tmp_path / f"{name}-full", **data)}
        )
        cases.append(
            {
                "kind": "train",
                "name": f"{name}-resumed",
                "config": _config(tmp_path / f"{name}-resumed", **data),
                "copy_snapshot": str(tmp_path / f"{name}-full" / f"frame-{KILLED_AFTER:06d}"),
            }
        )
    run_harness(2, cases, tmp_path)
    for name in sources:
        full = json.loads((tmp_path / f"{name}-full.json").read_text())
        resumed = json.loads((tmp_path / f"{name}-resumed.json").read_text())
        samples = 4 * 2  # per replica and frame
        assert full["data_positions"] == [samples * f for f in range(1, FRAMES + 1)], name
        assert resumed["start"] == KILLED_AFTER
        assert resumed["data_positions"] == full["data_positions"][KILLED_AFTER:], name
        assert resumed["losses"] == full["losses"][KILLED_AFTER:], name
        assert full["losses"][-1] < full["losses"][0], f"{name}: the model did not learn"
        saved = json.loads((tmp_path / f"{name}-full" / f"frame-{FRAMES:06d}" / "meta.json").read_text())
        assert saved["data"]["position"] == samples * FRAMES


@pytest.mark.usefixtures("one_rank_group")
def test_the_data_time_is_inside_the_frame_time() -> None:
    # 8 items of a known cost each, read in the training process (no workers).
    config = TrainConfig(
        data_factory="data_factory:slow_tokens",
        microbatches_per_frame=4,
        micro_batch_size=2,
        n_layers=1,
        policy="gpipe",
        frames=1,
    )
    loop = FrameLoop(config)
    try:
        metrics = loop.run_frame()
    finally:
        loop.close()
    data_s = 8 * SLOW_ITEM_S
    assert metrics.frame_s >= data_s
    assert metrics.data_wait_share * metrics.frame_s >= data_s
    assert metrics.samples_per_s <= 8 / data_s
    assert dist.get_world_size() == 1


@pytest.mark.usefixtures("one_rank_group")
def test_a_models_make_batch_is_timed_inside_the_frame() -> None:
    config = TrainConfig(microbatches_per_frame=2, micro_batch_size=1, n_layers=1, policy="gpipe", frames=1)
    spec = gpt_model_spec(config)

    def slow_batch(frame: int, replica: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(MAKE_BATCH_S)  # the known cost of making the frame's batch
        return spec.make_batch(frame, replica, n)

    loop = FrameLoop(config, spec=replace(spec, make_batch=slow_batch))
    try:
        metrics = loop.run_frame()
    finally:
        loop.close()
    assert metrics.frame_s >= MAKE_BATCH_S
    assert metrics.samples_per_s <= config.samples_per_frame / MAKE_BATCH_S
