"""Activation memory in bytes: measured by the executor, carried by the calibration, budgeted by the planner.

The executor measures each stage's bytes per micro-batch on its first forward (saved tensors plus
the stage output, and the loss on the last stage); they must be exactly what
``models.profiling.stage_activation_bytes`` counts for the same stages and micro-batch size. The
calibration turns them into ``costs.activation``; the planner's default budget is then 1F1B's peak
in bytes, and a byte limit is never exceeded. Multi-rank: ``test_memory_gloo.py``.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.gpt import gpt_model_spec
from hyperframe_runtime.models.profiling import stage_activation_bytes
from hyperframe_runtime.pipeline.calibration import Calibration, calibrate
from hyperframe_runtime.pipeline.candidates import candidate_plans, over_budget, planning_job
from hyperframe_runtime.pipeline.frame_loop import FrameLoop
from hyperframe_runtime.pipeline.memory import PlanPeaks, checked_budget, fits_budget, memory_budget
from hyperframe_runtime.pipeline.metrics import RankFrame
from hyperframe_runtime.pipeline.planning import FramePlan, plan_from_costs
from hyperframe_runtime.pipeline.selection import Candidate, ScheduleSelector
from hyperframe_runtime.schedule import cli
from hyperframe_runtime.schedule.baselines import baseline
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Placement
from hyperframe_runtime.schedule.planner import default_memory_limit, one_f_one_b_peaks, plan
from hyperframe_runtime.schedule.simulate import memory_peaks


@pytest.mark.usefixtures("one_rank_group")
@pytest.mark.parametrize("micro_batch_size", [1, 3])
def test_the_executor_measures_what_stage_activation_bytes_counts(micro_batch_size: int) -> None:
    # One rank holds both stages of the V: stage 1 gets stage 0's output locally, as on a V's turn.
    config = TrainConfig(
        policy="zbv", frames=2, microbatches_per_frame=4, micro_batch_size=micro_batch_size, d_model=32
    )
    loop = FrameLoop(config)
    try:
        assert loop.executor.activation_bytes == {}
        loop.run_frame()
        measured = loop.executor.activation_bytes
        expected = stage_activation_bytes(gpt_model_spec(config), 2, micro_batch_size)
        assert measured == dict(enumerate(expected))
        assert measured[1] > measured[0] > 0  # the last stage also holds the logits and the loss
        loop.run_frame()
        assert loop.executor.activation_bytes == measured  # measured once, kept
    finally:
        loop.close()


def test_activation_bytes_scale_with_the_micro_batch() -> None:
    spec = gpt_model_spec(TrainConfig(d_model=32))
    one, four = stage_activation_bytes(spec, 2, 1), stage_activation_bytes(spec, 2, 4)
    for a, b in zip(one, four, strict=True):
        assert b == pytest.approx(4 * a, rel=0.01)  # all per-sample tensors (position ids aside)


def _rank_frame(pp_rank: int, stages: list[int], sizes: dict[int, int]) -> RankFrame:
    records = [(s, kind, mb, 0.0, 0.1, 0.0) for s in stages for mb in range(2) for kind in ("F", "B")]
    return RankFrame(
        rank=pp_rank,
        pp_rank=pp_rank,
        dp_rank=0,
        records=records,
        reduces=[],
        losses=[],
        wall_start=0.0,
        pipeline_s=1.0,
        dp_wait_s=0.0,
        frame_s=1.0,
        peak_memory_bytes=0,
        frame=1,
        activation_bytes=sorted((s, sizes[s]) for s in stages if s in sizes),
    )


def test_calibration_carries_the_measured_bytes_into_costs_activation() -> None:
    placement = Placement.vshape(2)  # rank 0: stages 0, 3; rank 1: stages 1, 2
    sizes = {0: 1000, 1: 2000, 2: 3000, 3: 4000}
    window = [_rank_frame(0, [0, 3], sizes), _rank_frame(1, [1, 2], sizes)]
    assert calibrate(window, placement).costs.activation == (1000.0, 2000.0, 3000.0, 4000.0)
    # A stage not measured: no mixing of bytes and units, the costs keep one unit per stage.
    partial = [_rank_frame(0, [0, 3], sizes), _rank_frame(1, [1, 2], {1: 2000})]
    assert calibrate(partial, placement).costs.activation == ()


def _byte_costs(rng: random.Random, n: int) -> CostModel:
    return CostModel(
        forward=tuple(rng.uniform(0.5, 2.0) for _ in range(n)),
        backward_input=tuple(rng.uniform(0.5, 2.0) for _ in range(n)),
        backward_weight=tuple(rng.uniform(0.5, 2.0) for _ in range(n)),
        activation=tuple(float(rng.randint(1 << 20, 64 << 20)) for _ in range(n)),
    )


@pytest.mark.parametrize("seed", range(8))
def test_the_default_byte_budget_is_1f1bs_byte_peak_and_plans_stay_within_it(seed: int) -> None:
    rng = random.Random(seed)
    p, m = rng.choice([2, 3, 4]), rng.choice([4, 8])
    one = Placement.one_per_rank(p)
    costs = _byte_costs(rng, p)
    torch_1f1b = baseline("1F1B", p, m)
    assert torch_1f1b.placement == one
    peak_1f1b = max(memory_peaks(torch_1f1b.orders, one, costs)[1])
    assert default_memory_limit(costs, one, m) == pytest.approx(peak_1f1b)
    assert one_f_one_b_peaks(costs, one, m) == pytest.approx(memory_peaks(torch_1f1b.orders, one, costs)[1])
    for placement, stage_costs in ((one, costs), (Placement.vshape(p), _byte_costs(rng, 2 * p))):
        default = plan(stage_costs, placement, m, time_budget_s=0.02)
        assert default.memory_limit == pytest.approx(max(one_f_one_b_peaks(stage_costs, placement, m)))
        assert max(memory_peaks(default.orders, placement, stage_costs)[1]) <= default.memory_limit * (
            1 + 1e-9
        )
        # A user byte limit between the floor and the default: never exceeded.
        floor = max(sum(stage_costs.activation_of(s) for s in placement.stages_of(r)) for r in range(p))
        limit = int(floor + 0.5 * (default.memory_limit - floor))
        config = TrainConfig(pipeline=p, n_layers=2 * p, microbatches_per_frame=m, memory_limit_bytes=limit)
        fp = plan_from_costs(config, placement, stage_costs)
        assert max(memory_peaks(fp.orders, placement, stage_costs)[1]) <= limit


def test_memory_budget_units_and_errors() -> None:
    unit = CostModel.uniform(2)
    measured = CostModel(
        forward=(1.0, 1.0), backward_input=(1.0, 1.0), backward_weight=(1.0, 1.0), activation=(100.0, 300.0)
    )
    assert memory_budget(TrainConfig(), measured) is None  # 1F1B's peak on the same costs
    # memory_limit: heaviest-stage activations; the old meaning on unit costs, bytes once measured.
    assert memory_budget(TrainConfig(memory_limit=3), unit) == 3.0
    assert memory_budget(TrainConfig(memory_limit=3), measured) == 900.0
    # memory_limit_bytes: only against measured bytes (before, 1F1B's peak in units).
    assert memory_budget(TrainConfig(memory_limit_bytes=5000), measured) == 5000.0
    assert memory_budget(TrainConfig(memory_limit_bytes=5000), unit) is None
    with pytest.raises(ValueError, match=r"^memory_limit_bytes: set together with memory_limit"):
        TrainConfig(memory_limit=2, memory_limit_bytes=1000)
    with pytest.raises(ValueError, match=r"^memory_limit_bytes: -1 is below the minimum 0: use a value >= 0"):
        TrainConfig(memory_limit_bytes=-1)
    one = Placement.one_per_rank(2)
    with pytest.raises(ValueError, match=r"^memory_limit_bytes: 200 bytes .* raise it to at least 300"):
        checked_budget(TrainConfig(pipeline=2, memory_limit_bytes=200), measured, one)
    v_costs = CostModel.uniform(4)
    with pytest.raises(ValueError, match=r"^memory_limit: 1 heaviest-stage .* or set stages_per_rank to 1"):
        checked_budget(TrainConfig(pipeline=2, memory_limit=1), v_costs, Placement.vshape(2))


def _measured_calibration(placement: Placement, activation: tuple[float, ...]) -> Calibration:
    n = placement.num_stages
    costs = CostModel(
        forward=(1.0,) * n, backward_input=(1.0,) * n, backward_weight=(1.0,) * n, activation=activation
    )
    return Calibration(costs=costs, op_overhead_s=0.0, frame_overhead_s=0.0, frames=1)


def test_torch_schedules_over_a_byte_limit_are_left_out_and_the_planner_gets_the_same_bytes() -> None:
    p, m = 2, 6
    one = Placement.one_per_rank(p)
    activation = (3e6, 5e6)
    config_kw = {
        "pipeline": p,
        "n_layers": 4,
        "stages_per_rank": 1,
        "microbatches_per_frame": m,
        "replan_every": 1,
    }
    peak_1f1b = max(one_f_one_b_peaks(_measured_calibration(one, activation).costs, one, m))
    config = TrainConfig(**config_kw, memory_limit_bytes=int(peak_1f1b))  # type: ignore[arg-type]
    candidates, plans = candidate_plans(config)
    assert {"1f1b", "gpipe"} <= set(plans)  # nothing measured yet: nothing left out on bytes
    calibrations = {one: _measured_calibration(one, activation)}
    over = over_budget(config, plans, calibrations)
    assert peak_1f1b == max(2 * 3e6, 1 * 5e6)
    assert set(over) == {"gpipe"}  # all 6 micro-batches in flight: 6 x 5e6 B = 28.61 MiB on rank 1
    assert over["gpipe"] == (
        "its activation peak 28.61 MiB per rank (measured bytes) is over memory_limit_bytes (5.72 MiB)"
    )
    assert over_budget(TrainConfig(**config_kw), plans, calibrations) == {}  # no limit, no filter
    job = planning_job(config, {"hyperframe-1": one}, calibrations)
    assert [r.memory_limit for r in job.requests] == [peak_1f1b]
    assert all(fits_budget(config, plans[n].orders, one, calibrations[one].costs, m) for n in ("1f1b",))

    selector = ScheduleSelector([Candidate(c.name, c.placement, c.torch_schedule) for c in candidates])
    selector.drop("gpipe", over["gpipe"])
    assert selector.events == [f"gpipe left out: {over['gpipe']}"]
    ran = []
    for _ in range(8):
        step = selector.next_step()
        ran.append(step.name)
        selector.observe(step, 1.0)
    assert "1f1b" in ran and "gpipe" not in ran


def test_plan_peaks_are_in_bytes_only_once_measured() -> None:
    one = Placement.one_per_rank(2)
    plan_like = FramePlan("gpipe", one, baseline("GPipe", 2, 4).orders, 4)
    peaks = PlanPeaks()
    assert peaks.of(plan_like, None).plan_max == 0.0
    unit = Calibration(costs=CostModel.uniform(2), op_overhead_s=0.0, frame_overhead_s=0.0, frames=1)
    assert peaks.of(plan_like, unit).plan == ()
    got = peaks.of(plan_like, _measured_calibration(one, (1000.0, 4000.0)))
    assert got.in_bytes and got.plan == (4000.0, 16000.0)  # GPipe: all 4 micro-batches in flight
    assert got.one_f_one_b == (2000.0, 4000.0)


def test_hyperframe_sched_prints_peaks_next_to_1f1bs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    costs = tmp_path / "costs.yaml"
    costs.write_text("forward: [1, 1]\nactivation: [1000000, 3000000]\n", encoding="utf-8")
    assert cli.main(["plan", "--p", "2", "--m", "4", "--costs", str(costs), "--budget", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "peak activation memory (costs.activation units), 1F1B's" in out
    assert "1F1B's 3e+06" in out  # max(2 x 1e6, 1 x 3e6), the default budget
