"""Schedule IR: Action text form, OpKind order, Placement constructors and their validation."""

from __future__ import annotations

import pytest
from hyperframe_runtime.schedule.ir import Action, OpKind, Placement, ScheduleError


@pytest.mark.parametrize("kind", list(OpKind))
def test_action_str_parse_round_trip(kind: OpKind) -> None:
    action = Action(12, kind, 345)
    text = str(action)
    assert text == f"12{kind.value}345"
    assert Action.parse(text) == action


def test_action_str_matches_torch_compute_only_form() -> None:
    assert [str(Action(2, OpKind.F, 0)), str(Action(1, OpKind.I, 3))] == ["2F0", "1I3"]
    assert [str(Action(0, OpKind.W, 1)), str(Action(3, OpKind.B, 2))] == ["0W1", "3B2"]


def test_compute_kinds_come_first() -> None:
    kinds = list(OpKind)
    assert kinds[:4] == [OpKind.F, OpKind.I, OpKind.W, OpKind.B]
    assert all(k.is_compute for k in kinds[:4]) and not any(k.is_compute for k in kinds[4:])


@pytest.mark.parametrize("text", ["", "F0", "2X0", "2F", "-1F0", "2 F 0"])
def test_action_parse_rejects_garbage_with_the_expected_form(text: str) -> None:
    with pytest.raises(ScheduleError, match="expected STAGE KIND MICROBATCH"):
        Action.parse(text)


def test_placements() -> None:
    assert Placement.one_per_rank(3).stage_to_rank == (0, 1, 2)
    assert Placement.looped(2, 3).stage_to_rank == (0, 1, 0, 1, 0, 1)
    v = Placement.vshape(4)
    assert v.stage_to_rank == (0, 1, 2, 3, 3, 2, 1, 0)
    assert (v.num_stages, v.num_ranks) == (8, 4)
    assert v.stages_of(0) == (0, 7) and v.stages_of(3) == (3, 4)
    assert v.is_vshape and not Placement.looped(4, 2).is_vshape


def test_placement_must_use_every_rank() -> None:
    with pytest.raises(ScheduleError, match="must use every rank"):
        Placement((0, 2))
    with pytest.raises(ScheduleError, match="p = 0"):
        Placement.one_per_rank(0)
