"""Torch's own pipeline schedules as HyperFrame orders, for replay against the same costs.

Orders come from ``torch.distributed.pipelining.schedules`` through the adapter module
(:mod:`hyperframe_runtime.pipeline.torch_adapter`), imported lazily so the rest of this package
stays torch-free. One exception: torch 2.13's ``Schedule1F1B.pipeline_order`` is wrong on the last
rank (it runs F1..Fm instead of F0..F(m-1), so F0 is missing and a non-existent micro-batch m is
named), so "1F1B" here is the textbook 1F1B order of :func:`textbook_1f1b`, which equals torch's
on every other rank (a unit test checks that).
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperframe_runtime.schedule.ir import Action, OpKind, Orders, Placement, ScheduleError

__all__ = [
    "BASELINE_NAMES",
    "Baseline",
    "baseline",
    "baseline_placement",
    "textbook_1f1b",
]

BASELINE_NAMES: tuple[str, ...] = (
    "GPipe",
    "1F1B",
    "Interleaved1F1B",
    "LoopedBFS",
    "InterleavedZeroBubble",
    "ZBVZeroBubble",
    "DualPipeV",
)
"""Every torch schedule HyperFrame is compared against, in the order the bench prints them."""


@dataclass(frozen=True)
class Baseline:
    """One baseline schedule for (p, m): its name, placement and orders."""

    name: str
    placement: Placement
    orders: Orders


def baseline_placement(name: str, num_ranks: int) -> Placement:
    """The stage placement torch uses for schedule ``name`` (2 stages per rank unless single-stage)."""
    if name in ("GPipe", "1F1B"):
        return Placement.one_per_rank(num_ranks)
    if name in ("ZBVZeroBubble", "DualPipeV"):
        return Placement.vshape(num_ranks)
    if name in ("Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble"):
        return Placement.looped(num_ranks, 2)
    raise ScheduleError(f"unknown baseline {name!r}; known: {', '.join(BASELINE_NAMES)}")


def textbook_1f1b(num_ranks: int, num_microbatches: int) -> Orders:
    """1F1B (PipeDream-Flush): rank r runs p-1-r warm-up forwards, then alternates F and B, then
    drains the remaining backwards."""
    orders: Orders = {}
    for rank in range(num_ranks):
        warmup = min(num_ranks - 1 - rank, num_microbatches)
        actions = [Action(rank, OpKind.F, mb) for mb in range(warmup)]
        for i in range(num_microbatches - warmup):
            actions.append(Action(rank, OpKind.F, warmup + i))
            actions.append(Action(rank, OpKind.B, i))
        backwards = num_microbatches - warmup
        actions.extend(Action(rank, OpKind.B, mb) for mb in range(backwards, num_microbatches))
        orders[rank] = actions
    return orders


def baseline(name: str, num_ranks: int, num_microbatches: int) -> Baseline:
    """Orders of baseline ``name`` for p = ``num_ranks``, m = ``num_microbatches``.

    Raises ScheduleError when torch cannot build that schedule for (p, m).
    """
    placement = baseline_placement(name, num_ranks)
    if name == "1F1B":
        orders = textbook_1f1b(num_ranks, num_microbatches)
    else:
        from hyperframe_runtime.pipeline.torch_adapter import torch_schedule_orders

        orders = torch_schedule_orders(name, num_ranks, num_microbatches)
    return Baseline(name=name, placement=placement, orders=orders)
