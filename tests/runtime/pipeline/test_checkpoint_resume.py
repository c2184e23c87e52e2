"""Checkpoints every rank agrees on: kills at every phase of a save, a 2 x 2 resume, an unshared volume.

Real gloo ranks (``checkpoint_harness.py`` forks them; one torch import for all jobs):

- a pipeline-2 job is SIGKILLed on one rank at each phase of the save after frame 2
  (:data:`SAVE_PHASES`); the next job on the same directory resumes from the last *complete*
  snapshot (frame 1, or frame 2 once ``meta.json`` is written) and reproduces the uninterrupted
  losses, re-saving the frame whose save was cut;
- a pipeline 2 x data 2 job (V placement: two stages per rank, so one optimizer spans two stage
  modules) is killed mid-save and resumed; the loss curve it produces equals an uninterrupted run's;
- ranks that each get their own checkpoint directory (a volume that is not shared) all fail at
  start with the message naming the fix.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hyperframe_runtime.pipeline.checkpoint import META_FILE, SAVE_PHASES, complete_snapshots

pytestmark = pytest.mark.slow

HARNESS = Path(__file__).with_name("checkpoint_harness.py")
TOLERANCE = 1e-6
FRAMES = 4
KILLED_SAVE = 2  # the save after frame 2 is cut; frame 1's snapshot is complete by then
# Which rank dies at each phase: rank 1 before the markers are all in, rank 0 around meta.json.
KILLS: dict[str, tuple[int, int]] = {  # phase -> (rank killed, frame the resumed job starts at)
    "cleared": (1, 1),
    "shards-written": (1, 1),
    "committed": (1, 1),
    "all-committed": (0, 1),
    "complete": (0, 2),
}


def _config(checkpoint_dir: Path, **fields: Any) -> dict[str, Any]:
    return {
        "vocab_size": 32,
        "seq_len": 8,
        "d_model": 16,
        "n_heads": 2,
        "n_layers": 4,
        "pipeline": 2,
        "policy": "1f1b",
        "microbatches_per_frame": 4,
        "micro_batch_size": 2,
        "frames": FRAMES,
        "checkpoint_dir": str(checkpoint_dir),
        "checkpoint_every": 1,
        "checkpoint_keep": 0,  # keep every snapshot: the tests look at each frame's
        "lr": 3e-3,
        "planner_time_budget_s": 0.02,
        "seed": 7,
        **fields,
    }


def _runs(tmp: Path) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = [{"name": "full", "world": 2, "config": _config(tmp / "full")}]
    for phase, (rank, _) in KILLS.items():
        config = _config(tmp / phase)
        kill = {"frames_done": KILLED_SAVE, "rank": rank, "phase": phase}
        runs.append({"name": f"{phase}-killed", "world": 2, "config": config, "kill": kill})
        runs.append({"name": f"{phase}-resumed", "world": 2, "config": config})
    grid = {"data": 2, "policy": "hyperframe"}
    runs.append({"name": "grid-full", "world": 4, "config": _config(tmp / "grid-full", **grid)})
    grid_config = _config(tmp / "grid", **grid)
    kill = {"frames_done": 3, "rank": 3, "phase": "committed"}
    runs.append({"name": "grid-killed", "world": 4, "config": grid_config, "kill": kill})
    runs.append({"name": "grid-resumed", "world": 4, "config": grid_config})
    runs.append({"name": "unshared", "world": 2, "config": _config(tmp / "unshared"), "per_rank_dir": True})
    return runs


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("checkpoints")
    runs = _runs(tmp)
    spec = tmp / "runs.json"
    spec.write_text(json.dumps(runs), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(HARNESS), str(spec), str(tmp)],
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    assert proc.returncode == 0, f"harness failed:\n{proc.stdout}\n{proc.stderr[-8000:]}"
    return tmp, {run["name"]: json.loads((tmp / f"{run['name']}.json").read_text()) for run in runs}


def test_the_phases_killed_are_every_phase_of_a_save() -> None:
    assert tuple(KILLS) == SAVE_PHASES


@pytest.mark.parametrize("phase", SAVE_PHASES)
def test_a_job_killed_at_any_phase_resumes_from_the_last_complete_snapshot(
    jobs: tuple[Path, dict[str, dict[str, Any]]], phase: str
) -> None:
    tmp, results = jobs
    full, killed, resumed = results["full"], results[f"{phase}-killed"], results[f"{phase}-resumed"]
    assert full["exitcodes"] == [0, 0] and len(full["losses"]) == FRAMES, full
    rank, start = KILLS[phase]
    assert killed["exitcodes"][rank] == -9, killed  # SIGKILL
    assert killed["exitcodes"][1 - rank] != 0, killed  # the survivor fails in its next collective
    assert killed["losses"] == pytest.approx(full["losses"][:KILLED_SAVE], abs=TOLERANCE)

    assert resumed["exitcodes"] == [0, 0], resumed
    assert resumed["start"] == start
    assert resumed["losses"] == pytest.approx(full["losses"][start:], abs=TOLERANCE)
    # The cut save was redone: every frame has a complete snapshot, with every rank's marker.
    assert complete_snapshots(tmp / phase) == list(range(1, FRAMES + 1))
    cut = tmp / phase / f"frame-{KILLED_SAVE:06d}"
    assert sorted(p.name for p in (cut / "committed").iterdir()) == ["rank-0", "rank-1"]
    meta = json.loads((cut / META_FILE).read_text())
    assert meta["frames_done"] == KILLED_SAVE and meta["world_size"] == 2


def test_pipeline_2_by_data_2_resumes_with_the_uninterrupted_loss_curve(
    jobs: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    _, results = jobs
    full, killed, resumed = results["grid-full"], results["grid-killed"], results["grid-resumed"]
    assert full["exitcodes"] == [0, 0, 0, 0] and len(full["losses"]) == FRAMES, full
    assert killed["exitcodes"][3] == -9 and len(killed["losses"]) == 3, killed
    assert resumed["exitcodes"] == [0, 0, 0, 0] and resumed["start"] == 2, resumed
    curve = killed["losses"][: resumed["start"]] + resumed["losses"]
    assert curve == pytest.approx(full["losses"], abs=TOLERANCE)
    assert full["losses"][-1] < full["losses"][0], "the model did not learn"


def test_ranks_without_a_shared_volume_fail_at_start_naming_the_fix(
    jobs: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    _, results = jobs
    unshared = results["unshared"]
    assert unshared["exitcodes"] == [1, 1] and unshared["start"] is None, unshared
    for rank in (0, 1):
        error = unshared["errors"][str(rank)]
        assert "is not one volume shared by every rank" in error, error
        assert f"rank {rank} on " in error and f"does not see the files of rank(s) {1 - rank}" in error
        assert "ReadWriteMany" in error
