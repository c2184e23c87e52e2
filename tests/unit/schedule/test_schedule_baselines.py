"""Torch's own schedules, obtained through the adapter, replay without deadlock."""

from __future__ import annotations

import pytest
from hyperframe_runtime.pipeline.torch_adapter import torch_schedule_orders
from hyperframe_runtime.schedule.baselines import BASELINE_NAMES, baseline, textbook_1f1b
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import ScheduleError
from hyperframe_runtime.schedule.simulate import lb_tight, simulate
from hyperframe_runtime.schedule.validate import validate


@pytest.mark.parametrize("name", BASELINE_NAMES)
@pytest.mark.parametrize(("p", "m"), [(4, 8), (4, 16), (2, 4)])
def test_every_baseline_validates_and_replays(name: str, p: int, m: int) -> None:
    b = baseline(name, p, m)
    validate(b.orders, b.placement, m)
    costs = CostModel.uniform(b.placement.num_stages)
    result = simulate(b.orders, b.placement, costs, m)
    assert result.makespan >= lb_tight(costs, b.placement, m) - 1e-9


def test_textbook_1f1b_equals_torch_1f1b_except_torchs_last_rank() -> None:
    # Drift check for the documented workaround: torch 2.13's Schedule1F1B is the textbook order on
    # every rank but the last, where it runs F1..Fm (F0 missing, a non-existent micro-batch m added).
    p, m = 4, 8
    ours, theirs = textbook_1f1b(p, m), torch_schedule_orders("1F1B", p, m)
    for rank in range(p - 1):
        assert theirs[rank] == ours[rank]
    assert sorted(a.microbatch for a in theirs[p - 1] if a.kind.value == "F") == list(range(1, m + 1))


def test_dualpipev_needs_two_microbatches_per_rank() -> None:
    with pytest.raises(ScheduleError, match="torch DualPipeV cannot schedule p=4, m=4"):
        baseline("DualPipeV", 4, 4)


def test_unknown_baseline() -> None:
    with pytest.raises(ScheduleError, match="unknown baseline 'Foo'"):
        baseline("Foo", 4, 4)
