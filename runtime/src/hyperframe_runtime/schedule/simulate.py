"""Event-driven replay of per-rank orders against a cost model, and the makespan lower bounds.

Each rank runs its compute actions one at a time, in order, each as soon as its dependencies
(see :mod:`hyperframe_runtime.schedule.validate`) have arrived. A dependency produced on another
rank arrives ``costs.p2p`` after it ends. After a stage's last W (or B) its data-parallel gradient
all-reduce runs on the rank's comm stream, overlapped with compute. Activation memory of a
micro-batch is held from the start of its F to the end of its W (or B).
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Action, OpKind, Orders, Placement
from hyperframe_runtime.schedule.validate import (
    backward_kinds,
    check_deadlock,
    check_structure,
    compute_orders,
    predecessors,
)

__all__ = [
    "SimResult",
    "Span",
    "allreduce_finish",
    "critical_path",
    "earliest_start",
    "lb_tight",
    "lb_work",
    "memory_peaks",
    "rank_work",
    "simulate",
]


@dataclass(frozen=True, slots=True)
class Span:
    """One action (or one stage's all-reduce, ``action is None``) as it ran in the replay."""

    rank: int
    start: float
    end: float
    action: Action | None
    stage: int


@dataclass(frozen=True)
class SimResult:
    """What a replay measured."""

    makespan: float
    """Time from the first action's start (0) until every rank's compute and all-reduce finished."""
    busy: tuple[float, ...]
    """Compute time of each rank."""
    idle: tuple[float, ...]
    """``makespan - busy`` of each rank: bubbles, including the warm-up and drain edges."""
    peak_inflight: tuple[int, ...]
    """Most micro-batches of each stage alive at once (F started, W or B not finished)."""
    peak_memory: tuple[float, ...]
    """Peak activation memory of each rank, in ``costs.activation`` units."""
    spans: tuple[Span, ...]
    """Every compute action, then every all-reduce, with its start and end times."""
    num_ranks: int

    @property
    def bubble_share(self) -> float:
        """Share of rank-time that is idle."""
        return sum(self.idle) / (self.makespan * self.num_ranks) if self.makespan > 0 else 0.0


def memory_peaks(
    orders: Orders, placement: Placement, costs: CostModel
) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Peak in-flight micro-batches per stage and peak activation memory per rank.

    These depend on the orders alone: a rank runs its actions one at a time, so at each F start
    exactly the earlier actions of that rank have finished.
    """
    inflight = [0] * placement.num_stages
    peak_stage = [0] * placement.num_stages
    peak_rank = [0.0] * placement.num_ranks
    for rank, actions in orders.items():
        memory = 0.0
        for a in actions:
            if a.kind is OpKind.F:
                inflight[a.stage] += 1
                memory += costs.activation_of(a.stage)
                peak_stage[a.stage] = max(peak_stage[a.stage], inflight[a.stage])
                peak_rank[rank] = max(peak_rank[rank], memory)
            elif a.kind in (OpKind.W, OpKind.B):
                inflight[a.stage] -= 1
                memory -= costs.activation_of(a.stage)
    return tuple(peak_stage), tuple(peak_rank)


def simulate(orders: Orders, placement: Placement, costs: CostModel, num_microbatches: int) -> SimResult:
    """Replay ``orders``; raise ScheduleError (with the grid) if they are incomplete or deadlock."""
    costs.check_placement(placement)
    orders = compute_orders(orders)
    check_structure(orders, placement, num_microbatches)
    for rank in range(placement.num_ranks):
        orders.setdefault(rank, [])
    num_stages = placement.num_stages
    grad_kind = backward_kinds(orders)
    stage_rank = placement.stage_to_rank
    end: dict[Action, float] = {}
    spans: list[Span] = []
    pointer = dict.fromkeys(orders, 0)
    free_at = dict.fromkeys(orders, 0.0)
    waiting: dict[Action, list[int]] = {}
    work = sorted(orders, reverse=True)
    while work:
        rank = work.pop()
        actions = orders[rank]
        while pointer[rank] < len(actions):
            a = actions[pointer[rank]]
            start = free_at[rank]
            blocked = None
            for dep in predecessors(a, num_stages, grad_kind):
                t = end.get(dep)
                if t is None:
                    blocked = dep
                    break
                if stage_rank[dep.stage] != rank:
                    t += costs.p2p
                start = max(start, t)
            if blocked is not None:
                waiting.setdefault(blocked, []).append(rank)
                break
            finish = start + costs.op_cost(a.stage, a.kind, rank)
            end[a] = finish
            spans.append(Span(rank, start, finish, a, a.stage))
            free_at[rank] = finish
            pointer[rank] += 1
            work.extend(waiting.pop(a, ()))
    if any(pointer[r] < len(orders[r]) for r in orders):
        check_deadlock(orders, placement)  # raises with the grid
        raise AssertionError("replay stuck but the dependency check found no deadlock")
    last_grad: dict[int, float] = {}
    for a, t in end.items():
        if a.kind in (OpKind.W, OpKind.B):
            last_grad[a.stage] = max(last_grad.get(a.stage, 0.0), t)
    finish_at, reduce_spans = allreduce_finish(
        [free_at[r] for r in range(placement.num_ranks)], last_grad, costs, placement
    )
    spans.extend(reduce_spans)
    makespan = max(finish_at, default=0.0)
    busy = [0.0] * placement.num_ranks
    for span in spans:
        if span.action is not None:
            busy[span.rank] += span.end - span.start
    peak_stage, peak_rank = memory_peaks(orders, placement, costs)
    return SimResult(
        makespan=makespan,
        busy=tuple(busy),
        idle=tuple(makespan - b for b in busy),
        peak_inflight=peak_stage,
        peak_memory=peak_rank,
        spans=tuple(spans),
        num_ranks=placement.num_ranks,
    )


def allreduce_finish(
    compute_end: list[float], last_grad: dict[int, float], costs: CostModel, placement: Placement
) -> tuple[list[float], list[Span]]:
    """Each rank's finish time once its stages' DP all-reduces ran on its comm stream.

    A stage's all-reduce starts when its last W (or B) ends (``last_grad``) and the rank's comm
    stream is free; stages are reduced in the order they finish.
    """
    finish = list(compute_end)
    stream = [0.0] * placement.num_ranks
    spans: list[Span] = []
    for stage in sorted(last_grad, key=lambda s: (last_grad[s], s)):
        cost = costs.allreduce_of(stage)
        if cost <= 0:
            continue
        rank = placement.stage_to_rank[stage]
        begin = max(stream[rank], last_grad[stage])
        stream[rank] = begin + cost
        finish[rank] = max(finish[rank], stream[rank])
        spans.append(Span(rank, begin, begin + cost, None, stage))
    return finish, spans


def rank_work(costs: CostModel, placement: Placement, num_microbatches: int) -> tuple[float, ...]:
    """Compute time each rank must spend: every stage it owns, F + I + W, for every micro-batch."""
    work = [0.0] * placement.num_ranks
    for stage, rank in enumerate(placement.stage_to_rank):
        per_mb = sum(costs.op_cost(stage, k, rank) for k in (OpKind.F, OpKind.I, OpKind.W))
        work[rank] += per_mb * num_microbatches
    return tuple(work)


def earliest_start(costs: CostModel, placement: Placement) -> tuple[float, ...]:
    """The earliest time each rank can start anything: micro-batch 0's forward reaching it."""
    first = [float("inf")] * placement.num_ranks
    t = 0.0
    for stage, rank in enumerate(placement.stage_to_rank):
        if stage > 0 and placement.stage_to_rank[stage - 1] != rank:
            t += costs.p2p
        first[rank] = min(first[rank], t)
        t += costs.op_cost(stage, OpKind.F, rank)
    return tuple(first)


def critical_path(costs: CostModel, placement: Placement) -> float:
    """One micro-batch alone: F through every stage, I back through every stage, then stage 0's W."""
    ranks = placement.stage_to_rank
    hops = sum(1 for s in range(1, len(ranks)) if ranks[s] != ranks[s - 1])
    total = 2 * hops * costs.p2p
    for stage, rank in enumerate(ranks):
        total += costs.op_cost(stage, OpKind.F, rank) + costs.op_cost(stage, OpKind.I, rank)
    return total + costs.op_cost(0, OpKind.W, ranks[0])


def lb_work(costs: CostModel, placement: Placement, num_microbatches: int) -> float:
    """LB_work: the busiest rank's compute time."""
    return max(rank_work(costs, placement, num_microbatches))


def lb_tight(costs: CostModel, placement: Placement, num_microbatches: int) -> float:
    """LB_tight: max over ranks of (earliest start + work), and the one-micro-batch critical path."""
    work = rank_work(costs, placement, num_microbatches)
    starts = earliest_start(costs, placement)
    return max(max(s + w for s, w in zip(starts, work, strict=True)), critical_path(costs, placement))
