"""Orders as torch's compute-only CSV: one row per rank, one action per cell (``0F0,0F1,1I0``).

This is the format ``torch.distributed.pipelining``'s ``_PipelineScheduleRuntime._load_csv`` reads,
so any planner's output can be replayed by torch and by ``hyperframe-sched replay``. Empty cells
(torch writes them for explicit bubbles) are skipped on import; so are the bookkeeping actions
torch may add (``REDUCE_GRAD``, ``UNSHARD``, ``RESHARD``), which carry no micro-batch.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from hyperframe_runtime.schedule.ir import Action, Orders, ScheduleError

__all__ = ["dump_orders_csv", "load_orders_csv", "orders_from_csv", "orders_to_csv"]

_BOOKKEEPING = re.compile(r"^\s*\d+(REDUCE_GRAD|UNSHARD|RESHARD)\d*\s*$")


def orders_to_csv(orders: Orders) -> str:
    """CSV text with row r holding rank r's actions. Ranks must be 0..R-1."""
    ranks = sorted(orders)
    if ranks != list(range(len(ranks))):
        raise ScheduleError(f"orders: ranks {ranks} must be 0..{len(ranks) - 1} to write one row per rank")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for rank in ranks:
        writer.writerow([str(a) for a in orders[rank]])
    return out.getvalue()


def orders_from_csv(text: str, *, source: str = "<csv>") -> Orders:
    """Parse CSV text (row r = rank r) into orders; errors name the row and column."""
    orders: Orders = {}
    for rank, row in enumerate(csv.reader(io.StringIO(text))):
        actions: list[Action] = []
        for column, cell in enumerate(row):
            if not cell.strip() or _BOOKKEEPING.match(cell):
                continue
            try:
                actions.append(Action.parse(cell))
            except ScheduleError as exc:
                raise ScheduleError(
                    f"{source}: row {rank + 1} (rank {rank}), column {column + 1}: {exc}"
                ) from exc
        orders[rank] = actions
    if not orders:
        raise ScheduleError(f"{source}: no rows; expected one row of actions per rank")
    return orders


def dump_orders_csv(orders: Orders, path: str | Path) -> None:
    Path(path).write_text(orders_to_csv(orders), encoding="utf-8")


def load_orders_csv(path: str | Path) -> Orders:
    p = Path(path)
    return orders_from_csv(p.read_text(encoding="utf-8"), source=str(p))
