"""The hyperframe policy keeps the schedule that measures fastest, on real gloo ranks.

The planner's candidate is forced to a deliberately bad plan (every micro-batch through the
whole pipeline before the next starts: no overlap at all). The ops of the model sleep, so that
plan is slower than 1F1B and GPipe by construction on any machine. The run must measure it, say
in the log that it lost and why, and train on the faster schedule; the losses stay those of 1F1B
alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hyperframe_runtime.pipeline.selection import RECHECK_FIRST_EVERY
from pipeline_reference import run_harness

pytestmark = pytest.mark.slow


def _config(policy: str, frames: int) -> dict[str, Any]:
    return {
        "model": "sleepy_model:build",
        "pipeline": 2,
        "stages_per_rank": 1,
        "policy": policy,
        "microbatches_per_frame": 6,
        "micro_batch_size": 2,
        "frames": frames,
        "replan_every": 1,
        "lr": 1e-2,
        "seed": 3,
    }


def test_a_forced_bad_plan_is_abandoned_for_the_faster_measured_schedule(tmp_path: Path) -> None:
    frames = 14
    run_harness(
        2,
        [
            {
                "kind": "select",
                "name": "forced",
                "config": _config("hyperframe", frames),
                "forced": ["hyperframe-1"],
            },
            {"kind": "train", "name": "plain", "config": _config("1f1b", frames)},
        ],
        tmp_path,
    )
    run = json.loads((tmp_path / "forced.json").read_text())
    plain = json.loads((tmp_path / "plain.json").read_text())

    # Every candidate was measured, the bad plan lost and the log says so and why.
    assert {"hyperframe-1", "1f1b", "gpipe"} <= set(run["schedules"])
    winner = run["winner"]
    assert winner in ("1f1b", "gpipe")  # the same overlap here; either may measure faster
    lost = [e for e in run["events"] if "hyperframe-1 lost" in e]
    assert lost and "measured" in lost[0] and f"training runs on {winner}" in lost[0]
    # After exploring, every frame runs the winner, but for paired re-checks of the runner-up
    # (exploring frames, one in RECHECK_FIRST_EVERY at first).
    explored = next(e for e in run["events"] if ": explored " in e)
    decided = int(explored.split(":")[0].removeprefix("frame "))
    assert decided < frames - 2
    after = list(zip(run["schedules"][decided:], run["exploring"][decided:], strict=True))
    assert {name for name, exploring in after if not exploring} == {winner}
    rechecks = [name for name, exploring in after if exploring]
    assert set(rechecks) <= {"1f1b", "gpipe"} - {winner}
    assert len(rechecks) <= (len(after) + RECHECK_FIRST_EVERY) // (RECHECK_FIRST_EVERY + 1)
    # Switching schedules never changes the training: the losses equal plain 1F1B's.
    assert run["losses"] == pytest.approx(plain["losses"], abs=1e-6)
