"""Planner: valid, memory-respecting, deterministic orders of good quality."""

from __future__ import annotations

import pytest
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import OpKind, Placement, ScheduleError
from hyperframe_runtime.schedule.planner import default_memory_limit, plan
from hyperframe_runtime.schedule.simulate import lb_tight, simulate
from hyperframe_runtime.schedule.validate import validate


def half_chunks(p: int, **kw: float) -> CostModel:
    """A model cut into 2p equal chunks (each half a one-per-rank stage), activation 0.5 each."""
    n = 2 * p
    return CostModel(
        forward=(0.5,) * n,
        backward_input=(0.5,) * n,
        backward_weight=(kw.get("w", 0.5),) * n,
        activation=(0.5,) * n,
        p2p=kw.get("p2p", 0.0),
    )


@pytest.mark.parametrize(
    ("placement", "costs"),
    [
        (Placement.one_per_rank(4), CostModel.uniform(4)),
        (Placement.vshape(4), half_chunks(4)),
        (Placement.looped(4, 2), half_chunks(4, p2p=0.3)),
        (Placement.one_per_rank(3), CostModel.uniform(3, rank_slowdown=(1.0, 1.5, 1.0), p2p=0.2)),
        (
            Placement.one_per_rank(3),
            CostModel(
                forward=(1.0, 1.0, 1.0),
                backward_input=(1.0, 1.0, 1.0),
                backward_weight=(1.0, 1.0, 1.0),
                allreduce=(2.0, 0.5, 3.0),
            ),
        ),
    ],
)
@pytest.mark.parametrize("m", [1, 4, 9])
def test_plans_are_valid_and_respect_the_default_memory_budget(
    placement: Placement, costs: CostModel, m: int
) -> None:
    result = plan(costs, placement, m, time_budget_s=0.05)
    validate(result.orders, placement, m)
    replay = simulate(result.orders, placement, costs, m)
    assert replay.makespan == pytest.approx(result.predicted_makespan)
    assert result.lower_bound == pytest.approx(lb_tight(costs, placement, m))
    assert result.predicted_makespan >= result.lower_bound - 1e-9
    assert max(replay.peak_memory) <= default_memory_limit(costs, placement, m) + 1e-9


def test_default_budget_is_1f1b_peak() -> None:
    assert default_memory_limit(CostModel.uniform(4), Placement.one_per_rank(4), 16) == 4
    assert default_memory_limit(CostModel.uniform(4), Placement.one_per_rank(4), 2) == 2
    assert default_memory_limit(half_chunks(4), Placement.vshape(4), 16) == 4


@pytest.mark.parametrize("limit", [1.0, 1.5, 2.0, 3.0])
def test_a_tighter_memory_limit_is_respected(limit: float) -> None:
    placement, costs = Placement.vshape(4), half_chunks(4)
    result = plan(costs, placement, 8, memory_limit=limit, time_budget_s=0.05)
    assert max(simulate(result.orders, placement, costs, 8).peak_memory) <= limit + 1e-9


def test_too_small_a_memory_limit_names_the_field_and_the_minimum() -> None:
    with pytest.raises(ScheduleError, match=r"memory_limit = 0.5: too small; .* at least 1.0"):
        plan(half_chunks(4), Placement.vshape(4), 8, memory_limit=0.5)


def test_the_plan_is_deterministic() -> None:
    costs = CostModel(
        forward=(1.0, 1.2, 0.9, 1.4),
        backward_input=(1.1, 1.3, 1.0, 1.5),
        backward_weight=(0.7, 0.8, 0.6, 0.9),
        p2p=0.1,
    )
    first = plan(costs, Placement.one_per_rank(4), 12, time_budget_s=0.05)
    second = plan(costs, Placement.one_per_rank(4), 12, time_budget_s=0.05)
    assert first.orders == second.orders and first.policy == second.policy


def test_without_split_backward_only_f_and_b_are_planned() -> None:
    result = plan(
        CostModel.uniform(4), Placement.one_per_rank(4), 8, split_backward=False, time_budget_s=0.05
    )
    kinds = {a.kind for actions in result.orders.values() for a in actions}
    assert kinds == {OpKind.F, OpKind.B}


def test_vshape_reaches_the_lower_bound_on_uniform_costs() -> None:
    # Zero-bubble territory: with W split off and a V placement the only idle time left is the
    # unavoidable warm-up of the last rank, so the plan meets LB_tight exactly.
    placement, costs = Placement.vshape(4), half_chunks(4)
    result = plan(costs, placement, 8)
    assert result.predicted_makespan == pytest.approx(result.lower_bound)
    assert result.predicted_makespan < 3 * (8 + 4 - 1)  # 1F1B's makespan on the same model


def test_the_planner_routes_work_around_a_slow_rank() -> None:
    # Rank 1 is twice as slow: the plan keeps it busy, so the makespan is close to its work.
    costs = CostModel.uniform(4, rank_slowdown=(1.0, 2.0, 1.0, 1.0))
    placement = Placement.one_per_rank(4)
    result = plan(costs, placement, 12)
    assert result.predicted_makespan <= 1.05 * result.lower_bound
