"""Torch's own schedules as starting points of the planner's search.

The planner promises to be never worse, in its own cost model, than every torch schedule that
runs on the same placement and fits the same memory limit. It keeps that promise by construction:
those schedules' orders are replayed as candidates next to the list schedules, and the best
candidate wins. This module lists the schedules of a placement and turns their orders into the
planner's integer ops (a fused B becomes I then W at the same place, which replays no later: the
previous stage gets its gradient after I instead of after I + W, and W ends when B would have).

The orders come from the pure ports in :mod:`.ported` (fast at any size). DualPipeV has no port;
it is taken from torch itself (:mod:`.baselines`) when the problem has at most
:data:`TORCH_SEED_OPS` ops, where torch builds it in well under 0.1 s. With even chunks it holds
more than the default budget anyway (p + 0.5 stage units against 1F1B's p).
"""

from __future__ import annotations

import functools
from typing import Final

from hyperframe_runtime.schedule.baselines import BASELINE_NAMES, baseline, baseline_placement
from hyperframe_runtime.schedule.ir import Placement, ScheduleError
from hyperframe_runtime.schedule.ported import PORTED, RankOps
from hyperframe_runtime.schedule.problem import Problem

__all__ = ["TORCH_SEED_OPS", "seed_ops", "seed_orders"]

TORCH_SEED_OPS: Final = 20_000
"""Largest problem (F + I + W ops) for which a schedule without a port is built by torch."""


def seed_orders(placement: Placement, num_microbatches: int) -> list[tuple[str, RankOps]]:
    """``(name, per-rank ops)`` of every torch schedule that runs on ``placement`` for this m.

    Schedules torch cannot build for (p, m), for example DualPipeV with m < 2p, are left out.
    """
    p = placement.num_ranks
    ops = 3 * placement.num_stages * num_microbatches
    found = []
    for name in BASELINE_NAMES:
        if baseline_placement(name, p) != placement:
            continue
        port = PORTED.get(name)
        if port is not None:
            orders = port(p, num_microbatches)
        elif ops <= TORCH_SEED_OPS:
            orders = _torch_orders(name, p, num_microbatches)
        else:
            continue
        if orders is not None:
            found.append((name, orders))
    return found


@functools.lru_cache(maxsize=32)
def _torch_orders(name: str, num_ranks: int, num_microbatches: int) -> RankOps | None:
    try:
        orders = baseline(name, num_ranks, num_microbatches).orders
    except (ScheduleError, ImportError):  # not schedulable for (p, m), or no torch installed
        return None
    return [
        [(a.stage, a.kind.value, a.microbatch) for a in orders.get(r, []) if a.kind.is_compute]
        for r in range(num_ranks)
    ]


def seed_ops(problem: Problem, orders: RankOps) -> list[list[int]] | None:
    """``orders`` as the problem's integer ops; None when they cannot be expressed in it (I/W ops in
    a fused-backward problem) or do not run every op exactly once on its own rank."""
    n_st, m, split = problem.num_stages, problem.m, problem.split
    block = n_st * m
    stage_rank = problem.stage_rank
    out: list[list[int]] = []
    count = 0
    for r, rank_actions in enumerate(orders):
        ops: list[int] = []
        for stage, kind, mb in rank_actions:
            if stage >= n_st or mb >= m or stage_rank[stage] != r:
                return None
            rest = stage * m + mb
            if kind == "F":
                ops.append(rest)
            elif kind == "B":
                ops.append(block + rest)
                if split:
                    ops.append(2 * block + rest)
            elif not split:
                return None
            else:
                ops.append((block if kind == "I" else 2 * block) + rest)
        count += len(ops)
        out.append(ops)
    total = len(problem.kinds) * block
    if len(out) != problem.num_ranks or count != total or len({o for ops in out for o in ops}) != total:
        return None
    return out
