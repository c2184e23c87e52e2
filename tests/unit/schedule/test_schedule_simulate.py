"""Event-driven replay: closed forms on unit costs, bounds, comm, all-reduce and memory."""

from __future__ import annotations

import pytest
from hyperframe_runtime.schedule.baselines import textbook_1f1b
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Action, OpKind, Orders, Placement
from hyperframe_runtime.schedule.simulate import critical_path, lb_tight, lb_work, simulate


def gpipe(p: int, m: int) -> Orders:
    return {
        r: [Action(r, OpKind.F, mb) for mb in range(m)] + [Action(r, OpKind.B, mb) for mb in range(m)]
        for r in range(p)
    }


@pytest.mark.parametrize("schedule", [textbook_1f1b, gpipe])
@pytest.mark.parametrize(("p", "m"), [(2, 1), (4, 4), (4, 16), (8, 5)])
def test_unit_cost_chain_matches_the_closed_form_bubble(schedule: object, p: int, m: int) -> None:
    # F = 1, B = I + W = 2 on every stage: makespan (m + p - 1) * 3, bubble (p - 1) / (m + p - 1).
    costs = CostModel.uniform(p)
    result = simulate(schedule(p, m), Placement.one_per_rank(p), costs, m)  # type: ignore[operator]
    assert result.makespan == pytest.approx(3 * (m + p - 1))
    assert result.bubble_share == pytest.approx((p - 1) / (m + p - 1))
    assert all(busy == pytest.approx(3 * m) for busy in result.busy)


def test_1f1b_memory_peaks_are_p_minus_rank_and_gpipe_holds_all() -> None:
    p, m = 4, 8
    placement, costs = Placement.one_per_rank(p), CostModel.uniform(p)
    assert simulate(textbook_1f1b(p, m), placement, costs, m).peak_inflight == (4, 3, 2, 1)
    assert simulate(gpipe(p, m), placement, costs, m).peak_memory == (8.0,) * 4


def test_bounds() -> None:
    p, m = 4, 8
    placement = Placement.one_per_rank(p)
    costs = CostModel.uniform(p, p2p=0.5)
    assert lb_work(costs, placement, m) == pytest.approx(24)
    # Rank 3 starts after 3 forwards and 3 hops, then has 24 units of work.
    assert lb_tight(costs, placement, m) == pytest.approx(3 + 1.5 + 24)
    # One micro-batch alone: 4 F + 4 I + 1 W, and 3 hops each way.
    assert critical_path(costs, placement) == pytest.approx(9 + 3.0)
    assert lb_tight(costs, placement, 1) == pytest.approx(12)


def test_p2p_latency_delays_cross_rank_dependencies_only() -> None:
    placement = Placement.vshape(2)  # stages 0,3 on rank 0; 1,2 on rank 1
    costs = CostModel.uniform(4, p2p=0.25)
    orders: Orders = {
        0: [Action(0, OpKind.F, 0), Action(3, OpKind.F, 0), Action(3, OpKind.B, 0), Action(0, OpKind.B, 0)],
        1: [Action(1, OpKind.F, 0), Action(2, OpKind.F, 0), Action(2, OpKind.B, 0), Action(1, OpKind.B, 0)],
    }
    result = simulate(orders, placement, costs, 1)
    # 4 F + 4 B in a chain, with hops 0->1, 2->3, 3->2 (backward), 1->0: 12 + 4 * 0.25.
    assert result.makespan == pytest.approx(13.0)
    starts = {span.action: span.start for span in result.spans}
    assert starts[Action(2, OpKind.F, 0)] == pytest.approx(2.25)  # same rank as stage 1: no hop


def test_allreduce_overlaps_and_extends_the_tail() -> None:
    p, m = 2, 2
    base = CostModel.uniform(p)
    costs = CostModel(
        forward=base.forward,
        backward_input=base.backward_input,
        backward_weight=base.backward_weight,
        allreduce=(1.5, 1.5),
    )
    plain = simulate(textbook_1f1b(p, m), Placement.one_per_rank(p), base, m)
    with_dp = simulate(textbook_1f1b(p, m), Placement.one_per_rank(p), costs, m)
    # Stage 1 finishes first and its all-reduce hides under stage 0's last backward; stage 0's
    # all-reduce starts at the end and adds its full cost.
    assert with_dp.makespan == pytest.approx(plain.makespan + 1.5)
    assert sum(1 for s in with_dp.spans if s.action is None) == 2


def test_slow_rank_scales_its_ops() -> None:
    costs = CostModel.uniform(2, rank_slowdown=(1.0, 2.0))
    result = simulate(textbook_1f1b(2, 1), Placement.one_per_rank(2), costs, 1)
    assert result.busy == (3.0, 6.0)
