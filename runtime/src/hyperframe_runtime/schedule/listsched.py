"""Event-driven priority list scheduling: the planner's construction step.

A time-ordered event loop hands each rank, whenever it is free, the best op whose inputs have
arrived, as ranked by a :class:`Policy`. Ops are integers for speed. Memory is enforced with an
admission rule: a forward that brings a micro-batch onto a rank for the first time must leave
headroom for that micro-batch's later stages on the same rank, so admitted work can always finish.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Action, OpKind, Placement

__all__ = ["Policy", "Problem", "list_schedule"]

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Policy:
    """How a free rank picks its next op. The planner searches over these."""

    forward_first: bool = False
    """When both a forward and an input-backward are ready: run the forward first."""
    deep_forward_first: bool = True
    """Among ready forwards, prefer the later stage (pushes micro-batches toward the loss)."""
    deep_backward_first: bool = True
    """Among ready input-backwards, prefer the later stage."""
    weight_wait: float = 0.0
    """Leave the rank idle instead of starting a W when an I or F arrives within
    ``weight_wait * cost(W)``; 0 fills every gap with W."""
    memory_scale: float = 1.0
    """Fraction of the memory limit the forward admission may use (below 1 keeps ranks leaner)."""
    entry_headroom: float = 1.0
    """When a forward brings a new micro-batch onto a rank, keep room for this many micro-batches'
    later stages on that rank (V-shape and looped placements); at least 1 avoids deadlock."""
    jitter: float = 0.0
    """Random perturbation of the micro-batch order keys (0 = strict FIFO); seeded by ``seed``."""
    seed: int = 0


class Problem:
    """Integer-indexed form of (costs, placement, m) shared by every list-schedule run."""

    def __init__(
        self,
        costs: CostModel,
        placement: Placement,
        num_microbatches: int,
        *,
        split_backward: bool,
        memory_limit: float,
    ) -> None:
        self.placement = placement
        self.num_stages = s_count = placement.num_stages
        self.m = m = num_microbatches
        self.num_ranks = placement.num_ranks
        self.split = split_backward
        self.kinds = (OpKind.F, OpKind.I, OpKind.W) if split_backward else (OpKind.F, OpKind.B)
        self.stage_rank = list(placement.stage_to_rank)
        self.memory_limit = memory_limit
        self.p2p = costs.p2p
        self.act = [costs.activation_of(s) for s in range(s_count)]
        self.cost: list[float] = []
        for kind in self.kinds:
            for s in range(s_count):
                c = costs.op_cost(s, kind, self.stage_rank[s])
                self.cost.extend([c] * m)
        # Activation of the later stages a micro-batch still has to visit on the same rank.
        self.later_need = [
            sum(self.act[t] for t in range(s + 1, s_count) if self.stage_rank[t] == self.stage_rank[s])
            for s in range(s_count)
        ]
        self.prev_local = [_prev_local_stage(self, s) for s in range(s_count)]
        self.entry = [all(self.stage_rank[t] != self.stage_rank[s] for t in range(s)) for s in range(s_count)]

    def op(self, kind_index: int, stage: int, mb: int) -> int:
        return (kind_index * self.num_stages + stage) * self.m + mb

    def action(self, op: int) -> Action:
        kind_index, rest = divmod(op, self.num_stages * self.m)
        stage, mb = divmod(rest, self.m)
        return Action(stage, self.kinds[kind_index], mb)


def list_schedule(problem: Problem, policy: Policy) -> tuple[list[list[int]], float] | None:
    """Build per-rank op lists with ``policy``; return them with their makespan (compute only),
    or None if the policy deadlocks under the memory limit."""
    pr = problem
    n_st, m, split = pr.num_stages, pr.m, pr.split
    block = n_st * m
    total = len(pr.kinds) * block
    stage_rank, cost, act, p2p = pr.stage_rank, pr.cost, pr.act, pr.p2p
    later_need, entry = pr.later_need, pr.entry
    limit = pr.memory_limit * policy.memory_scale + _EPS
    headroom = policy.entry_headroom
    last = n_st - 1
    mb_key = _mb_keys(m, policy)
    entry_order = sorted(range(m), key=mb_key.__getitem__)
    f_sign = -1 if policy.deep_forward_first else 1
    b_sign = -1 if policy.deep_backward_first else 1
    forward_first = policy.forward_first
    weight_wait = policy.weight_wait
    inf = float("inf")

    ready_at = [0.0] * total
    npred = [0] * total
    for s in range(n_st):
        for mb in range(m):
            npred[s * m + mb] = 1 if s > 0 else 0
            npred[block + s * m + mb] = 1 if s == last else 2
            if split:
                npred[2 * block + s * m + mb] = 1

    n_ranks = pr.num_ranks
    fwd: list[list[int]] = [[] for _ in range(n_ranks)]
    bwd: list[list[int]] = [[] for _ in range(n_ranks)]
    wgt: list[list[int]] = [[] for _ in range(n_ranks)]
    local = [pr.placement.stages_of(r) for r in range(n_ranks)]
    free_at = [0.0] * n_ranks
    used = [0.0] * n_ranks
    pending_later = [0] * n_st  # micro-batches whose later stages on this stage's rank are pending
    orders: list[list[int]] = [[] for _ in range(n_ranks)]
    rank0 = stage_rank[0]
    next_entry = 0  # stage-0 forwards are all ready at time 0; handed out in entry_order
    events: list[tuple[float, int]] = [(0.0, r) for r in range(n_ranks)]
    heapq.heapify(events)
    push, pop = heapq.heappush, heapq.heappop

    def admissible(s: int, r: int) -> bool:
        need = used[r] + act[s]
        if entry[s]:
            reserve = later_need[s]
            for t in local[r]:
                if pending_later[t] and later_need[t] > reserve:
                    reserve = later_need[t]
            need += reserve * headroom
        return need <= limit

    done = 0
    last_end = 0.0
    while events:
        t, r = pop(events)
        if free_at[r] > t + _EPS:
            continue
        if free_at[r] > t:
            t = free_at[r]
        horizon = t + _EPS
        chosen = -1
        best_b = None
        nxt = inf
        for o in bwd[r]:
            if ready_at[o] <= horizon:
                key = (b_sign * ((o - block) // m), mb_key[o % m])
                if best_b is None or key < best_b[0]:
                    best_b = (key, o)
            elif ready_at[o] < nxt:
                nxt = ready_at[o]
        f_cands = []
        for o in fwd[r]:
            if ready_at[o] <= horizon:
                f_cands.append((f_sign * (o // m), mb_key[o % m], o))
            elif ready_at[o] < nxt:
                nxt = ready_at[o]
        if r == rank0 and next_entry < m:
            mb0 = entry_order[next_entry]
            f_cands.append((0, mb_key[mb0], mb0))
        best_f = -1
        if f_cands:
            f_cands.sort()
            for cand in f_cands:
                if admissible(cand[2] // m, r):
                    best_f = cand[2]
                    break
        if best_b is not None and not (forward_first and best_f >= 0):
            chosen = best_b[1]
        elif best_f >= 0:
            chosen = best_f
        elif wgt[r]:
            w = min(wgt[r], key=lambda o: mb_key[o % m])
            if f_cands or nxt - t >= weight_wait * cost[w] - _EPS:
                chosen = w
            else:
                push(events, (nxt, r))
                continue
        if chosen < 0:
            if nxt < inf:
                push(events, (nxt, r))
            continue
        kind_index, rest = divmod(chosen, block)
        s = rest // m
        end = t + cost[chosen]
        free_at[r] = end
        if end > last_end:
            last_end = end
        orders[r].append(chosen)
        done += 1
        push(events, (end, r))
        if kind_index == 0:
            if s == 0:
                next_entry += 1
            else:
                fwd[r].remove(chosen)
            used[r] += act[s]
            if later_need[s] > 0:
                pending_later[s] += 1
            if not entry[s]:
                pending_later[pr.prev_local[s]] -= 1
            succs: tuple[int, ...] = (rest + m, block + rest) if s < last else (block + rest,)
        elif kind_index == 1:
            bwd[r].remove(chosen)
            if split:
                succs = (block + rest - m, 2 * block + rest) if s > 0 else (2 * block + rest,)
            else:
                used[r] -= act[s]
                succs = (block + rest - m,) if s > 0 else ()
        else:
            wgt[r].remove(chosen)
            used[r] -= act[s]
            succs = ()
        for o in succs:
            o_rank = stage_rank[(o % block) // m]
            arrive = end + p2p if o_rank != r else end
            if arrive > ready_at[o]:
                ready_at[o] = arrive
            npred[o] -= 1
            if npred[o] == 0:
                k = o // block
                (fwd if k == 0 else bwd if k == 1 else wgt)[o_rank].append(o)
                if o_rank != r:
                    at = ready_at[o] if ready_at[o] > free_at[o_rank] else free_at[o_rank]
                    push(events, (at, o_rank))
    if done != total:
        return None
    return orders, last_end


def _prev_local_stage(pr: Problem, s: int) -> int:
    r = pr.stage_rank[s]
    for t in range(s - 1, -1, -1):
        if pr.stage_rank[t] == r:
            return t
    return -1


def _mb_keys(m: int, policy: Policy) -> list[float]:
    if policy.jitter <= 0:
        return [float(mb) for mb in range(m)]
    import random

    rng = random.Random(policy.seed)
    return [mb + rng.uniform(-policy.jitter, policy.jitter) for mb in range(m)]
