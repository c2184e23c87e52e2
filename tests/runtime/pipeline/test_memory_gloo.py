"""Activation memory in bytes on real gloo ranks: the plan's costs carry measured bytes.

Two CPU ranks run the built-in GPT under the hyperframe policy (one stage per rank, candidates
1f1b, gpipe and the planner's). Each rank's executor measures its stage's bytes per micro-batch;
the calibration gathers them, so the planner's plan is made from ``costs.activation`` in bytes
(the last stage, with the logits and the loss, heavier than the first), and the frame metrics
report the running plan's peak next to 1F1B's. With ``memory_limit_bytes`` at 1F1B's byte peak
(computed here with ``stage_activation_bytes`` on the same stages), GPipe is left out once the
bytes are measured, and the planner's plan stays within the limit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.gpt import gpt_model_spec
from hyperframe_runtime.models.profiling import stage_activation_bytes
from pipeline_reference import run_harness

pytestmark = pytest.mark.slow

_CONFIG: dict[str, Any] = {
    "vocab_size": 64,
    "seq_len": 16,
    "d_model": 32,
    "n_heads": 2,
    "n_layers": 4,
    "pipeline": 2,
    "stages_per_rank": 1,
    "microbatches_per_frame": 6,
    "micro_batch_size": 2,
    # Exploring 1F1B and GPipe (7 frames), the plan's PLAN_LAG_FRAMES, its measured frames:
    # the planner's plan is in by frame 10 whatever the host's load (the frame it arrives at
    # does not depend on how fast the helper plans). The layer split stays even: this test is
    # about bytes, and a measured split's second look would depend on timings.
    "frames": 13,
    "layer_split": "even",
    "replan_every": 1,
    "planner_time_budget_s": 0.05,
    "seed": 3,
}


def test_the_plan_is_made_from_measured_bytes_and_a_byte_limit_holds(tmp_path: Path) -> None:
    sizes = stage_activation_bytes(gpt_model_spec(TrainConfig(**_CONFIG)), 2, 2)
    peak_1f1b = max(2 * sizes[0], 1 * sizes[1])  # rank r of 1F1B holds min(m, p - r) micro-batches
    run_harness(
        2,
        [
            {"kind": "select", "name": "plain", "config": _CONFIG, "forced": []},
            {
                "kind": "select",
                "name": "limit",
                "config": {**_CONFIG, "memory_limit_bytes": peak_1f1b},
                "forced": [],
            },
        ],
        tmp_path,
    )
    plain = json.loads((tmp_path / "plain.json").read_text())
    limit = json.loads((tmp_path / "limit.json").read_text())

    # The planner's plans were made from the measured bytes, not from one unit per stage.
    # (It may plan 1F1B's very order, and then it is not run: its plan is read from the loop.)
    assert plain["planned"]["hyperframe-1"] == [float(sizes[0]), float(sizes[1])]
    assert limit["planned"]["hyperframe-1"] == [float(sizes[0]), float(sizes[1])]
    assert sizes[1] > sizes[0] > 1000
    # Peaks are reported in bytes next to 1F1B's once measured; 1F1B's is the same whatever ran.
    measured = [(peak, base) for peak, base in plain["peaks"] if base > 0]
    assert measured and {base for _, base in measured} == {float(peak_1f1b)}
    ran = [s for s, (_, base) in zip(plain["schedules"], plain["peaks"], strict=True) if base > 0]
    for name, (peak, base) in zip(ran, measured, strict=True):
        if name == "gpipe":
            assert peak == 6 * sizes[1]  # every micro-batch in flight on the last stage
        else:
            assert peak <= base  # 1F1B itself, and the planner's plan in the default budget

    # With the byte limit GPipe is left out as soon as the bytes are known, and says why.
    left_out = [e for e in limit["events"] if "gpipe left out" in e]
    assert left_out and "memory_limit_bytes" in left_out[0]
    assert "gpipe" not in limit["schedules"]
    assert all(peak <= peak_1f1b for peak, _ in limit["peaks"])
