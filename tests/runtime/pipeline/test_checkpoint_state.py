"""Snapshot contents and the agreement rule, in this process (one-rank gloo group where needed).

- the agreement rule (:func:`agree_on_snapshot`) is pure: every rank must see rank 0's choice as
  its newest complete snapshot;
- a save keyed by parameter name loads into a different stage split: two stages on one rank (one
  AdamW over both, as the V placement has) round-trip into one unsplit module, model and AdamW
  state alike, through ``get_state_dict`` / ``set_state_dict``;
- a directory without ``meta.json`` is never a complete snapshot.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.gpt import gpt_model_spec
from hyperframe_runtime.pipeline.checkpoint import (
    META_FILE,
    agree_on_snapshot,
    complete_snapshots,
    latest_snapshot,
    load_snapshot,
    resume_snapshot,
    save_snapshot,
)


def test_ranks_agree_when_all_see_rank_0s_newest() -> None:
    assert agree_on_snapshot([[1, 2], [1, 2], [2]], 2) is None
    assert agree_on_snapshot([[], []], None) is None


@pytest.mark.parametrize(
    ("views", "chosen", "fragment"),
    [
        ([[1, 2], [1]], 2, "rank 1: frame-000001"),
        ([[1], [1, 2]], 1, "rank 1: frame-000002"),  # a rank that sees a newer one also disagrees
        ([[], [3]], None, "rank 0 chose none; rank 0: none; rank 1: frame-000003"),
    ],
)
def test_ranks_that_see_different_snapshots_fail_naming_each_view(
    views: list[list[int]], chosen: int | None, fragment: str
) -> None:
    problem = agree_on_snapshot(views, chosen)
    assert problem is not None and fragment in problem
    assert "ranks see different newest complete snapshots" in problem and "same checkpoint volume" in problem


def _trained(modules: dict[int, torch.nn.Module], config: TrainConfig) -> torch.optim.AdamW:
    spec = gpt_model_spec(config)
    optimizer = torch.optim.AdamW([p for m in modules.values() for p in m.parameters()], lr=1e-2)
    for frame in range(2):
        inputs, targets = spec.make_batch(frame, 0, 2)
        x = inputs
        for _, module in sorted(modules.items()):
            x = module(x)
        optimizer.zero_grad()
        spec.loss_fn(x, targets).backward()
        optimizer.step()
    return optimizer


@pytest.mark.usefixtures("one_rank_group")
def test_two_stages_on_a_rank_round_trip_into_another_split(tmp_path: Path) -> None:
    config = TrainConfig(vocab_size=32, seq_len=8, d_model=16, n_heads=2, n_layers=4, seed=3)
    spec = gpt_model_spec(config)
    split = {s: spec.build_stage(s, 2) for s in (0, 1)}  # both stages on this rank, one AdamW
    optimizer = _trained(split, config)
    save_snapshot(
        tmp_path, frames_done=2, global_step=2, modules=split, optimizer=optimizer, plan={}, config={}
    )

    whole = {0: spec.build_stage(0, 1)}  # a fresh, unsplit model: different weights until loaded
    fresh = torch.optim.AdamW(whole[0].parameters(), lr=1e-2)
    snapshot = resume_snapshot(tmp_path)
    assert snapshot is not None and snapshot.frames_done == 2 and snapshot.world_size == 1
    load_snapshot(snapshot, modules=whole, optimizer=fresh)

    saved = {n: p for m in split.values() for n, p in m.named_parameters()}
    loaded = dict(whole[0].named_parameters())
    assert sorted(saved) == sorted(loaded)
    for name, param in loaded.items():
        assert torch.equal(param, saved[name]), name
        before, after = optimizer.state[saved[name]], fresh.state[param]
        assert float(after["step"]) == float(before["step"]) == 2.0
        assert torch.equal(after["exp_avg"], before["exp_avg"]), name
        assert torch.equal(after["exp_avg_sq"], before["exp_avg_sq"]), name


@pytest.mark.usefixtures("one_rank_group")
def test_only_a_directory_with_meta_json_is_a_snapshot(tmp_path: Path) -> None:
    config = TrainConfig(vocab_size=32, seq_len=8, d_model=16, n_heads=2, n_layers=2)
    module = {0: gpt_model_spec(config).build_stage(0, 1)}
    optimizer = torch.optim.AdamW(module[0].parameters())
    path = save_snapshot(
        tmp_path, frames_done=1, global_step=1, modules=module, optimizer=optimizer, plan={}, config={}
    )
    save_snapshot(
        tmp_path, frames_done=3, global_step=3, modules=module, optimizer=optimizer, plan={}, config={}
    )
    (tmp_path / "frame-000003" / META_FILE).unlink()  # as if killed before meta.json
    assert complete_snapshots(tmp_path) == [1]
    latest = latest_snapshot(tmp_path)
    assert latest is not None and latest.path == path
    resumed = resume_snapshot(tmp_path)
    assert resumed is not None and resumed.frames_done == 1
