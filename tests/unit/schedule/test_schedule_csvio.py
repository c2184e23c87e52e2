"""Torch compute-only CSV export/import."""

from __future__ import annotations

from pathlib import Path

import pytest
from hyperframe_runtime.schedule.baselines import textbook_1f1b
from hyperframe_runtime.schedule.csvio import dump_orders_csv, load_orders_csv, orders_from_csv, orders_to_csv
from hyperframe_runtime.schedule.ir import Action, OpKind, ScheduleError


def test_round_trip_through_a_file(tmp_path: Path) -> None:
    orders = textbook_1f1b(4, 6)
    path = tmp_path / "orders.csv"
    dump_orders_csv(orders, path)
    assert path.read_text().splitlines()[3].startswith("3F0,3B0,3F1")
    assert load_orders_csv(path) == orders


def test_split_backward_actions_round_trip() -> None:
    orders = {0: [Action(0, OpKind.F, 0), Action(0, OpKind.I, 0), Action(0, OpKind.W, 0)]}
    assert orders_to_csv(orders) == "0F0,0I0,0W0\n"
    assert orders_from_csv(orders_to_csv(orders)) == orders


def test_torch_written_cells_are_tolerated() -> None:
    # torch writes empty cells for explicit bubbles and may add REDUCE_GRAD/UNSHARD bookkeeping.
    orders = orders_from_csv("0F0,,0B0,0REDUCE_GRAD\n,1F0,1B0,1UNSHARD\n")
    assert orders == {
        0: [Action(0, OpKind.F, 0), Action(0, OpKind.B, 0)],
        1: [Action(1, OpKind.F, 0), Action(1, OpKind.B, 0)],
    }


def test_bad_cell_names_row_and_column() -> None:
    with pytest.raises(ScheduleError, match=r"row 2 \(rank 1\), column 3"):
        orders_from_csv("0F0,0B0\n1F0,1B0,1Q0\n", source="x.csv")


def test_ranks_must_be_contiguous() -> None:
    with pytest.raises(ScheduleError, match=r"must be 0\.\.1"):
        orders_to_csv({0: [], 2: []})
