"""A resumed run goes on with what the interrupted one measured and decided, on real gloo ranks.

Snapshots carry the schedule selector's record and the layer split's look in progress
(``FrameLoop._snapshot_plan``). A run interrupted while it explores its schedules goes on
exploring from where it stopped rather than exploiting the schedule of its last frame; a run
interrupted during the layer split's second look finishes the look. (That the resumed decisions
are exactly the uninterrupted run's, given the same frame times, is shown without ranks in
``test_selection_record.py``; here the frame times are real.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hyperframe_runtime.pipeline.selection import MEASURED_FRAMES
from pipeline_reference import run_harness

pytestmark = pytest.mark.slow


def _config(checkpoint_dir: Path, **extra: Any) -> dict[str, Any]:
    return {
        "vocab_size": 64,
        "seq_len": 16,
        "d_model": 32,
        "n_heads": 2,
        "n_layers": 4,
        "pipeline": 2,
        "stages_per_rank": 1,
        "microbatches_per_frame": 4,
        "micro_batch_size": 2,
        "replan_every": 1,
        "checkpoint_dir": str(checkpoint_dir),
        "checkpoint_every": 1,
        "checkpoint_keep": 0,
        "planner_time_budget_s": 0.02,
        "seed": 5,
        **extra,
    }


def test_a_run_resumed_mid_exploration_goes_on_exploring(tmp_path: Path) -> None:
    frames = 16
    full = _config(tmp_path / "full", frames=frames, layer_split="even")
    resumed = _config(tmp_path / "resumed", frames=frames, layer_split="even")
    run_harness(
        2,
        [
            {"kind": "select", "name": "full", "config": full, "forced": []},
            # Interrupted after frame 3: 1F1B and GPipe are half measured.
            {
                "kind": "select",
                "name": "resumed",
                "config": resumed,
                "forced": [],
                "copy_snapshot": str(tmp_path / "full" / "frame-000003"),
            },
        ],
        tmp_path,
    )
    a = json.loads((tmp_path / "full.json").read_text())
    b = json.loads((tmp_path / "resumed.json").read_text())
    # Frames 1 to 3 ran 1F1B's warm-up, then one measured frame of 1F1B and one of GPipe.
    assert a["schedules"][:3] == ["1f1b", "1f1b", "gpipe"] and all(a["exploring"][:3])
    assert b["start"] == 3 and b["exploring"][0]
    # The resumed run measures only what was left (no warm-up, MEASURED_FRAMES - 1 more frames of
    # each), then decides, as the full run did.
    decided = next(e for e in b["events"] if ": explored " in e)
    until = int(decided.split(":")[0].removeprefix("frame ")) - b["start"]
    explored = [s for s, x in zip(b["schedules"][:until], b["exploring"][:until], strict=True) if x]
    assert 1 <= explored.count("gpipe") <= MEASURED_FRAMES - 1
    assert explored.count("1f1b") <= MEASURED_FRAMES - 1
    assert any(": explored " in e for e in a["events"])


def test_a_run_resumed_during_the_second_look_finishes_the_look(tmp_path: Path) -> None:
    def config(name: str) -> dict[str, Any]:
        # A head over a large vocabulary costs several blocks: the first look moves blocks off the
        # last rank, and a second look (frames 5 to 8) follows on the new split.
        return _config(
            tmp_path / name, vocab_size=16384, n_layers=8, policy="1f1b", layer_split="measured", frames=9
        )

    run_harness(
        2,
        [
            {"kind": "train", "name": "full", "config": config("full")},
            # Interrupted after frame 6, in the middle of the second look.
            {
                "kind": "train",
                "name": "resumed",
                "config": config("resumed"),
                "copy_snapshot": str(tmp_path / "full" / "frame-000006"),
            },
        ],
        tmp_path,
    )
    a = json.loads((tmp_path / "full.json").read_text())
    b = json.loads((tmp_path / "resumed.json").read_text())
    assert a["events"][1].startswith("frame 8: layer split ") and a["events"][1].endswith("(second look)")
    assert b["start"] == 6
    assert len(b["events"]) == 1 and b["events"][0].startswith("frame 8: layer split ")
    assert b["events"][0].endswith("(second look)")
    assert b["losses"] == pytest.approx(a["losses"][6:], abs=1e-6)
