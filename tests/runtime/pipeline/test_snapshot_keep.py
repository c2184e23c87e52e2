"""Which snapshots a job keeps and which it refuses: the pure decisions of ``pipeline.checkpoint``.

The run-level behaviour (a pruned volume after a real run, a refused resume exiting 2) is in
``test_preemption.py``; these cover the edges quickly on plain directories.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.pipeline.checkpoint import (
    META_FILE,
    Snapshot,
    complete_snapshots,
    job_dir,
    prune_snapshots,
    snapshot_dir,
    snapshot_mismatch,
    snapshots_to_prune,
)


@pytest.mark.parametrize(
    ("complete", "keep", "doomed"),
    [
        ([1, 2, 3, 4, 5], 3, [1, 2]),
        ([5, 1, 3], 3, []),
        ([2, 4], 1, [2]),  # the newest complete one always stays
        ([1, 2, 3], 0, []),  # 0 keeps all
        ([], 3, []),
    ],
)
def test_snapshots_to_prune_keeps_the_newest(complete: list[int], keep: int, doomed: list[int]) -> None:
    assert snapshots_to_prune(complete, keep) == doomed


def _snapshot(root: Path, frames: int, *, complete: bool) -> Path:
    path = snapshot_dir(root, frames)
    path.mkdir(parents=True)
    (path / "__0_0.distcp").write_bytes(b"shard")
    if complete:
        (path / META_FILE).write_text(json.dumps({"frames_done": frames}))
    return path


def test_pruning_deletes_old_complete_snapshots_and_never_an_incomplete_one(tmp_path: Path) -> None:
    for frames in (1, 2, 3, 4):
        _snapshot(tmp_path, frames, complete=True)
    stale = _snapshot(tmp_path, 0, complete=False)  # a cut save, older than all
    writing = _snapshot(tmp_path, 5, complete=False)  # a save in progress
    assert prune_snapshots(tmp_path, 2) == [1, 2]
    assert complete_snapshots(tmp_path) == [3, 4]
    assert not snapshot_dir(tmp_path, 1).exists() and not snapshot_dir(tmp_path, 2).exists()
    assert stale.is_dir() and writing.is_dir()


def test_a_job_folder_is_the_job_id_under_the_checkpoint_dir() -> None:
    assert job_dir("/ckpt", "train-1234") == Path("/ckpt/train-1234")
    assert job_dir("/ckpt", "") == Path("/ckpt")


@pytest.mark.parametrize("bad", ["a/b", "..", "x y"])
def test_a_job_id_must_be_one_folder_name(bad: str) -> None:
    with pytest.raises(ValueError, match=r"job_id: .* is not one folder name"):
        TrainConfig(job_id=bad)


def _saved(**fields: object) -> Snapshot:
    config = TrainConfig(pipeline=2, n_layers=4, **fields).to_dict()  # type: ignore[arg-type]
    return Snapshot(
        path=Path("/ckpt/j/frame-000004"), frames_done=4, global_step=4, plan={}, config=config, world_size=2
    )


def test_a_snapshot_of_the_same_model_and_layout_is_accepted_across_schedules() -> None:
    run = TrainConfig(pipeline=2, n_layers=4, policy="gpipe", frames=99, checkpoint_keep=7).to_dict()
    assert snapshot_mismatch(_saved(), run, 2) is None


def test_a_mismatching_snapshot_names_every_difference_and_the_fix() -> None:
    run = TrainConfig(pipeline=1, data=2, n_layers=6, d_model=32).to_dict()
    problem = snapshot_mismatch(_saved(), run, 4)
    assert problem is not None
    assert problem.startswith(
        "checkpoint_dir: the newest complete snapshot /ckpt/j/frame-000004 was saved by another run: "
    )
    for part in (
        "world size 2 (this run: 4)",
        "layout pipeline 2 (this run: 1)",
        "layout data 1 (this run: 2)",
        "model d_model 64 (this run: 32)",
        "model n_layers 4 (this run: 6)",
    ):
        assert part in problem, problem
    assert "fresh checkpoint directory" in problem


def test_a_user_model_built_with_other_args_is_another_model() -> None:
    """``entrypoint.module.args`` shape the user's model: a snapshot of other args is refused."""
    saved = _saved(model="my_project.model:build", model_args={"width": 256})
    run = TrainConfig(pipeline=2, n_layers=4, model="my_project.model:build", model_args={"width": 512})
    problem = snapshot_mismatch(saved, run.to_dict(), 2)
    assert problem is not None and "model model_args {'width': 256} (this run: {'width': 512})" in problem
    same = TrainConfig(pipeline=2, n_layers=4, model="my_project.model:build", model_args={"width": 256})
    assert snapshot_mismatch(saved, same.to_dict(), 2) is None
