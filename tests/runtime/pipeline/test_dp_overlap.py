"""The data-parallel all-reduce of a V stage overlaps the rank's remaining compute (trace).

Pipeline 2 x data 2 on the V: rank 0 holds stages 0 and 3. Stage 3's last backward comes before
stage 0's, so stage 3's gradient all-reduce, started at its REDUCE_GRAD point, must be in flight
while rank 0 still computes stage 0. The trace shows it; the all-reduce time also enters the cost
model (``costs.allreduce``) through the calibration.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hyperframe_runtime.pipeline.calibration import calibrate
from hyperframe_runtime.pipeline.metrics import RankFrame
from hyperframe_runtime.schedule.ir import Placement
from pipeline_reference import run_harness

pytestmark = pytest.mark.slow


def test_v_stage_all_reduce_overlaps_the_remaining_compute(tmp_path: Path) -> None:
    config = {
        "vocab_size": 64,
        "seq_len": 16,
        "d_model": 32,
        "n_heads": 2,
        "n_layers": 4,
        "pipeline": 2,
        "data": 2,
        "policy": "zbv",
        "microbatches_per_frame": 4,
        "micro_batch_size": 2,
        "frames": 2,
        "trace_dir": str(tmp_path / "trace"),
        "seed": 3,
    }
    run_harness(4, [{"kind": "train", "name": "v", "config": config}], tmp_path)
    events = json.loads((tmp_path / "trace" / "trace.json").read_text())
    slices = [e for e in events if e.get("ph") == "X" and e["pid"] == 0 and e["args"].get("frame") == 2]
    compute = [e for e in slices if e["cat"] in ("F", "I", "W", "B")]
    reduce3 = next(e for e in slices if e["name"] == "all-reduce stage 3")
    reduce0 = next(e for e in slices if e["name"] == "all-reduce stage 0")
    last_compute_end = max(e["ts"] + e["dur"] for e in compute)
    assert reduce3["ts"] < last_compute_end, (
        "stage 3's all-reduce did not start before rank 0's compute ended"
    )
    assert any(e["args"]["stage"] == 0 and e["ts"] > reduce3["ts"] for e in compute)
    assert reduce0["ts"] >= reduce3["ts"]

    # The measured all-reduce spans become per-stage costs of the model.
    ops = [json.loads(line) for line in (tmp_path / "trace" / "ops.jsonl").read_text().splitlines()]
    window = [
        RankFrame(
            rank=o["rank"],
            pp_rank=o["rank"] % 2,
            dp_rank=o["rank"] // 2,
            records=[tuple(r) for r in o["records"]],
            reduces=[tuple(r) for r in o["reduces"]],
            losses=[],
            wall_start=0.0,
            pipeline_s=o["frame_s"],
            dp_wait_s=o["dp_wait_s"],
            frame_s=o["frame_s"],
            peak_memory_bytes=0,
            frame=o["frame"],
        )
        for o in ops
    ]
    costs = calibrate(window, Placement.vshape(2)).costs
    assert len(costs.allreduce) == 4 and all(c > 0 for c in costs.allreduce)
