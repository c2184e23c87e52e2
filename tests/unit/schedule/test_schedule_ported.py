"""The pure-Python ports of torch's schedule generators equal torch's own orders."""

from __future__ import annotations

import pytest
from hyperframe_runtime.schedule.baselines import baseline
from hyperframe_runtime.schedule.ir import ScheduleError
from hyperframe_runtime.schedule.ported import PORTED


@pytest.mark.parametrize("name", sorted(PORTED))
@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 8])
def test_port_equals_torch(name: str, p: int) -> None:
    for m in (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 24, 32):
        try:
            orders = baseline(name, p, m).orders
            expected = [[(a.stage, a.kind.value, a.microbatch) for a in orders.get(r, [])] for r in range(p)]
        except ScheduleError:
            expected = None  # torch refuses this (p, m); so must the port
        assert PORTED[name](p, m) == expected, f"{name} p={p} m={m}"
