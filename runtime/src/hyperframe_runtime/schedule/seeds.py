"""Torch's own schedules as starting points of the planner's search.

The planner promises to be never worse, in its own cost model, than every torch schedule that
runs on the same placement and fits the same memory limit. It keeps that promise by construction:
those schedules' orders are replayed as candidates next to the list schedules, and the best
candidate wins. This module lists the schedules of a placement and turns their orders into the
planner's integer ops (a fused B becomes I then W at the same place, which replays no later: the
previous stage gets its gradient after I instead of after I + W, and W ends when B would have).

The orders come from the pure ports in :mod:`.ported` (fast at any size, checked against torch's
own orders by a unit test), so seeding never imports torch.
"""

from __future__ import annotations

from hyperframe_runtime.schedule.baselines import BASELINE_NAMES, baseline_placement
from hyperframe_runtime.schedule.ir import Placement
from hyperframe_runtime.schedule.ported import PORTED, RankOps
from hyperframe_runtime.schedule.problem import Problem

__all__ = ["seed_ops", "seed_orders"]


def seed_orders(placement: Placement, num_microbatches: int) -> list[tuple[str, RankOps]]:
    """``(name, per-rank ops)`` of every torch schedule that runs on ``placement`` for this m.

    Schedules torch cannot build for (p, m), for example DualPipeV with m < 2p, are left out.
    """
    p = placement.num_ranks
    found = []
    for name in BASELINE_NAMES:
        if baseline_placement(name, p) != placement:
            continue
        orders = PORTED[name](p, num_microbatches)
        if orders is not None:
            found.append((name, orders))
    return found


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
