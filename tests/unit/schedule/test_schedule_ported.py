"""The pure-Python ports of torch's schedule generators equal torch's own orders."""

from __future__ import annotations

import os
import subprocess
import sys

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


def test_planning_never_imports_torch() -> None:
    # The seeds come from the ports, so the planner stays usable (and fast to start) without torch.
    code = (
        "import sys\n"
        "from hyperframe_runtime.schedule.costs import CostModel\n"
        "from hyperframe_runtime.schedule.ir import Placement\n"
        "from hyperframe_runtime.schedule.planner import plan\n"
        "for pl in (Placement.vshape(4), Placement.one_per_rank(4), Placement.looped(4, 2)):\n"
        "    plan(CostModel.uniform(pl.num_stages), pl, 8, memory_limit=100.0, time_budget_s=0.01)\n"
        "assert 'torch' not in sys.modules, 'the planner imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy())
