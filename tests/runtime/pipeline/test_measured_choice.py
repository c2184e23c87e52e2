"""The hyperframe policy's run-time side without ranks: drift against the calibrated costs."""

from __future__ import annotations

import pytest
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.pipeline.calibration import Calibration
from hyperframe_runtime.pipeline.measured_choice import MeasuredChoice
from hyperframe_runtime.pipeline.metrics import RankFrame
from hyperframe_runtime.schedule.costs import CostModel


def _frame(f_s: list[float], b_s: list[float]) -> RankFrame:
    """Rank 0's frame on one stage per rank: stage 0's forwards and fused backwards."""
    records, t = [], 0.0
    for mb, (f, b) in enumerate(zip(f_s, b_s, strict=True)):
        records.append((0, "F", mb, t, t + f, 0.0))
        records.append((0, "B", mb, t + f, t + f + b, 0.0))
        t += f + b
    return RankFrame(
        rank=0, pp_rank=0, dp_rank=0, records=records, reduces=[], losses=[1.0], wall_start=0.0,
        pipeline_s=t, dp_wait_s=0.0, frame_s=t, peak_memory_bytes=0,
    )  # fmt: skip


@pytest.fixture
def choice() -> MeasuredChoice:
    config = TrainConfig(pipeline=2, n_layers=4, stages_per_rank=1, microbatches_per_frame=4, replan_every=1)
    made = MeasuredChoice(config, is_reporter=False)
    plan = made.next_plan()[1]
    costs = CostModel(forward=(0.010, 0.010), backward_input=(0.010, 0.010), backward_weight=(0.010, 0.010))
    made.calibrations[plan.placement] = Calibration(
        costs=costs, op_overhead_s=0.0, frame_overhead_s=0.0, frames=3
    )
    return made


def test_one_slow_op_is_not_a_cost_drift(choice: MeasuredChoice) -> None:
    plan = choice.next_plan()[1]
    # The frame's first forward took 5x as long (a hiccup); the other ops cost what was calibrated.
    frame = _frame([0.050, 0.010, 0.010, 0.010], [0.020] * 4)
    assert choice.drift(plan, frame) == pytest.approx(0.0, abs=1e-9)


def test_every_op_slower_is_a_drift_of_that_ratio(choice: MeasuredChoice) -> None:
    plan = choice.next_plan()[1]
    assert choice.drift(plan, _frame([0.015] * 4, [0.030] * 4)) == pytest.approx(0.5)
    assert choice.drift(plan, _frame([0.008] * 4, [0.016] * 4)) == pytest.approx(0.2)


def test_no_calibration_no_drift() -> None:
    config = TrainConfig(pipeline=2, n_layers=4, stages_per_rank=1, replan_every=1)
    choice = MeasuredChoice(config, is_reporter=False)
    assert choice.drift(choice.next_plan()[1], _frame([0.1] * 4, [0.2] * 4)) == 0.0


def test_every_candidate_plan_carries_its_activation_peak_for_the_tie_break() -> None:
    config = TrainConfig(pipeline=2, n_layers=8, microbatches_per_frame=4, replan_every=1)
    peaks = MeasuredChoice(config, is_reporter=False).selector.record.peaks
    # Stage activations in flight on the busiest rank: 1F1B holds p, GPipe all m; on the V
    # (two stages per rank) ZBV and Interleaved1F1B hold more than 1F1B on one stage per rank.
    assert peaks["1f1b"] == 2 and peaks["gpipe"] == 4
    assert peaks["zbv"] > peaks["1f1b"] and peaks["interleaved1f1b"] > peaks["1f1b"]
