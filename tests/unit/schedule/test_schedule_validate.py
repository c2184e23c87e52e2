"""Dependency, structure and deadlock validation; errors show the grid and mark the bad step."""

from __future__ import annotations

import pytest
from hyperframe_runtime.schedule.baselines import textbook_1f1b
from hyperframe_runtime.schedule.ir import Action, OpKind, Placement, ScheduleError
from hyperframe_runtime.schedule.validate import validate


def test_textbook_1f1b_is_valid() -> None:
    validate(textbook_1f1b(4, 8), Placement.one_per_rank(4), 8)


def test_deadlock_marks_the_stuck_steps() -> None:
    orders = textbook_1f1b(2, 2)
    # Rank 0 runs B0 before F1 is sent, fine; but make rank 1 wait for a backward before a forward.
    orders[1] = [
        Action(1, OpKind.F, 1),
        Action(1, OpKind.B, 1),
        Action(1, OpKind.F, 0),
        Action(1, OpKind.B, 0),
    ]
    orders[0] = [
        Action(0, OpKind.F, 0),
        Action(0, OpKind.B, 0),
        Action(0, OpKind.F, 1),
        Action(0, OpKind.B, 1),
    ]
    with pytest.raises(ScheduleError) as info:
        validate(orders, Placement.one_per_rank(2), 2)
    message = str(info.value)
    assert message.startswith("deadlock: ")
    assert "rank 0 step 1: 0B0 waits for 1B0 (rank 1 step 3)" in message
    assert "rank 1 step 0: 1F1 waits for 0F1 (rank 0 step 2)" in message
    grid = message.splitlines()
    assert grid[1].startswith("step")
    assert ">0B0<" in grid[2] and ">1F1<" in grid[3]


def test_weight_before_its_input_backward_is_a_deadlock_on_the_same_rank() -> None:
    orders = {0: [Action(0, OpKind.F, 0), Action(0, OpKind.W, 0), Action(0, OpKind.I, 0)]}
    with pytest.raises(ScheduleError, match=r"rank 0 step 1: 0W0 waits for 0I0 \(rank 0 step 2\)") as info:
        validate(orders, Placement.one_per_rank(1), 1)
    assert ">0W0<" in str(info.value)


def test_missing_and_misplaced_actions() -> None:
    placement = Placement.one_per_rank(2)
    orders = textbook_1f1b(2, 2)
    orders[1].remove(Action(1, OpKind.B, 1))
    with pytest.raises(ScheduleError, match="1I1 and 1W1 missing"):
        validate(orders, placement, 2)
    orders = textbook_1f1b(2, 2)
    orders[0].append(orders[1].pop())
    with pytest.raises(ScheduleError, match="wrong rank: stage 1 belongs to rank 1") as info:
        validate(orders, placement, 2)
    assert ">1B1<" in str(info.value)


def test_duplicate_and_mixed_backward() -> None:
    placement = Placement.one_per_rank(1)
    with pytest.raises(ScheduleError, match="appears twice"):
        validate({0: [Action(0, OpKind.F, 0), Action(0, OpKind.F, 0), Action(0, OpKind.B, 0)]}, placement, 1)
    mixed = {0: [Action(0, OpKind.F, 0), Action(0, OpKind.B, 0), Action(0, OpKind.W, 0)]}
    with pytest.raises(ScheduleError, match="both B and I/W"):
        validate(mixed, placement, 1)


def test_long_schedules_show_a_window_around_the_bad_step() -> None:
    orders = textbook_1f1b(2, 40)
    f, b = orders[0].index(Action(0, OpKind.F, 39)), orders[0].index(Action(0, OpKind.B, 39))
    orders[0][f], orders[0][b] = orders[0][b], orders[0][f]
    with pytest.raises(ScheduleError) as info:
        validate(orders, Placement.one_per_rank(2), 40)
    message = str(info.value)
    assert f"rank 0 step {f}: 0B39 waits for 0F39 (rank 0 step {b})" in message
    assert f"(steps {f - 8}..79 of 80 shown)" in message
    assert ">0B39<" in message
