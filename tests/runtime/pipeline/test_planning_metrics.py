"""Single-process pieces of the frame loop: policy plans, measured costs, metrics and the trace."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.pipeline.metrics import RankFrame, frame_metrics, in_flight_s
from hyperframe_runtime.pipeline.planning import (
    FramePlan,
    costs_from_samples,
    estimate_p2p,
    initial_plan,
    orders_digest,
    placement_for,
)
from hyperframe_runtime.pipeline.trace import TraceWriter
from hyperframe_runtime.schedule.ir import OpKind, Placement
from hyperframe_runtime.schedule.validate import validate


@pytest.mark.parametrize("policy", ["hyperframe", "gpipe", "1f1b", "interleaved1f1b", "zbv"])
def test_initial_plan_is_valid_for_every_policy(policy: str) -> None:
    config = TrainConfig(policy=policy, pipeline=2, n_layers=4, microbatches_per_frame=4)  # type: ignore[arg-type]
    plan = initial_plan(config)
    assert plan.placement == placement_for(config)
    assert plan.placement.num_stages == config.num_stages
    validate(plan.orders, plan.placement, 4)
    kinds = {a.kind for actions in plan.orders.values() for a in actions}
    if policy in ("hyperframe", "zbv"):
        assert OpKind.W in kinds  # split backward: I and W ops


def test_frame_plan_json_round_trip_keeps_the_order_table() -> None:
    plan = initial_plan(TrainConfig(pipeline=2, n_layers=4, microbatches_per_frame=4))
    again = FramePlan.from_json(json.loads(json.dumps(plan.to_json())))
    assert again.orders == plan.orders
    assert again.placement == plan.placement == Placement.vshape(2)
    assert again.costs == plan.costs
    assert orders_digest(again.orders) == orders_digest(plan.orders)


def test_costs_from_samples_takes_medians_and_splits_fused_backward() -> None:
    samples = [
        (0, "F", 1.0),
        (0, "F", 3.0),
        (0, "F", 2.0),
        (0, "B", 4.0),
        (1, "F", 5.0),
        (1, "I", 1.0),
        (1, "W", 0.5),
    ]
    costs = costs_from_samples(samples, Placement.one_per_rank(2))
    assert costs.forward == (2.0, 5.0)
    assert costs.backward_input == (2.0, 1.0)
    assert costs.backward_weight == (2.0, 0.5)


def _rank(rank: int, losses: list[float], frame_s: float) -> RankFrame:
    # Two ops of 0.2 s each with a 0.1 s wait before the second; pipeline program 0.6 s.
    return RankFrame(
        rank=rank,
        pp_rank=rank,
        dp_rank=0,
        records=[(rank, "F", 0, 0.0, 0.2, 0.0), (rank, "B", 0, 0.3, 0.5, 0.1)],
        reduces=[],
        losses=losses,
        wall_start=100.0 + rank,
        pipeline_s=0.6,
        dp_wait_s=0.1,
        frame_s=frame_s,
        peak_memory_bytes=1000 * (rank + 1),
    )


def test_frame_metrics_and_trace_files(tmp_path: Path) -> None:
    ranks = [_rank(0, [], 0.8), _rank(1, [2.0, 4.0], 1.0)]
    metrics = frame_metrics(1, ranks, samples_per_frame=8, tokens_per_sample=16, loss_terms=2)
    assert metrics.loss == 3.0
    assert metrics.frame_s == 1.0
    assert metrics.samples_per_s == 8.0
    assert metrics.tokens_per_s == 128.0
    assert metrics.bubble_share == pytest.approx(0.2)  # 0.6 s program - 0.4 s compute
    assert metrics.comm_wait_share == pytest.approx(0.1)
    assert metrics.peak_memory_bytes == 2000
    assert metrics.dp_overlap_share == 0.0  # no DP all-reduce ran

    writer = TraceWriter(tmp_path)
    writer.add_frame(1, ranks, metrics)
    gpipe = initial_plan(TrainConfig(policy="gpipe", pipeline=2, n_layers=2, microbatches_per_frame=1))
    svg = writer.add_gantt(1, gpipe, ranks).read_text()
    assert svg.count("<svg") == 3  # the planned and the actual chart inside one picture
    assert "planned order on measured costs (gpipe)" in svg and "actual (replica 0)" in svg
    writer.close()
    trace = json.loads((tmp_path / "trace.json").read_text())  # closed: a complete JSON array
    ops = [e for e in trace if e.get("ph") == "X" and e["cat"] in ("F", "B")]
    assert sorted(e["name"] for e in ops) == ["0B0", "0F0", "1B0", "1F0"]
    second_rank_f = next(e for e in ops if e["name"] == "1F0")
    assert second_rank_f["ts"] == pytest.approx(1e6)  # ranks aligned by their wall-clock start
    assert [json.loads(line)["loss"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [
        3.0
    ]


def test_estimate_p2p_from_idle_consumers_of_cross_rank_inputs() -> None:
    def rank_frame(rank: int, records: list[tuple[int, str, int, float, float, float]]) -> RankFrame:
        return RankFrame(
            rank=rank, pp_rank=rank, dp_rank=0, records=records, reduces=[], losses=[], wall_start=100.0,
            pipeline_s=1.0, dp_wait_s=0.0, frame_s=1.0, peak_memory_bytes=0, frame=1,
        )  # fmt: skip

    window = [
        # rank 0 ends F0 at 0.10; waits from 0.30 for the gradient rank 1 sends at 0.35, starts 0.50
        rank_frame(0, [(0, "F", 0, 0.0, 0.10, 0.0), (0, "B", 0, 0.50, 0.60, 0.20)]),
        # rank 1 idles from 0.0 and starts F0 at 0.15 (0.05 after rank 0 finished it)
        rank_frame(1, [(1, "F", 0, 0.15, 0.25, 0.15), (1, "B", 0, 0.25, 0.35, 0.0)]),
    ]
    assert estimate_p2p(window, Placement.one_per_rank(2)) == pytest.approx(0.10)  # median of 0.05, 0.15
    assert estimate_p2p(window[:1], Placement.one_per_rank(2)) == 0.0


def test_dp_overlap_is_the_share_of_the_all_reduces_in_flight_that_no_rank_waited_for() -> None:
    # Rank 0: stage 0's all-reduce from 0.2 to 0.5 s and stage 1's from 0.4 to 0.6 s (0.4 s in
    # flight together), of which it waited 0.1 s at the frame end; rank 1: 0.1 s in flight, all
    # of it waited for. 0.5 s in flight, 0.2 s exposed: 60 % hidden.
    ranks = [
        replace(_rank(0, [], 0.8), reduces=[(0, 0.2, 0.5), (1, 0.4, 0.6)]),
        replace(_rank(1, [1.0], 0.8), reduces=[(1, 0.5, 0.6)]),
    ]
    metrics = frame_metrics(1, ranks, samples_per_frame=8, tokens_per_sample=16, loss_terms=2)
    assert metrics.dp_overlap_share == pytest.approx(0.6)
    assert metrics.comm_wait_share == pytest.approx(0.1 / 0.8)


def test_in_flight_time_is_the_union_of_the_spans() -> None:
    assert in_flight_s([]) == 0.0
    assert in_flight_s([(3, 0.5, 0.7), (0, 0.1, 0.3), (1, 0.2, 0.4), (2, 0.25, 0.35)]) == pytest.approx(0.5)
