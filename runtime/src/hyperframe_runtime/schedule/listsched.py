"""Event-driven priority list scheduling: the planner's construction step.

A time-ordered event loop hands each rank, whenever it is free, the best op whose inputs have
arrived, as ranked by a :class:`Policy`. Ops are integers for speed. Memory is enforced with an
admission rule: a forward that brings a micro-batch onto a rank for the first time must leave
headroom for that micro-batch's later stages on the same rank, so admitted work can always finish.
"""

from __future__ import annotations

import heapq
from typing import NamedTuple

from hyperframe_runtime.schedule.problem import Policy, Problem

__all__ = ["Schedule", "list_schedule"]

_EPS = 1e-9


class Schedule(NamedTuple):
    """A list schedule: per-rank integer orders and their timing."""

    orders: list[list[int]]
    makespan: float
    """Compute makespan (no all-reduce)."""
    rank_end: list[float]
    last_grad: list[float]
    """End of each stage's last W (or B): when its DP all-reduce can start."""
    asap: bool
    """True when no rank idled on purpose, so these times are exactly what an as-soon-as-possible
    replay of ``orders`` gives (:func:`simulate`); False when a wait rule fired."""


def list_schedule(problem: Problem, policy: Policy) -> Schedule | None:
    """Build per-rank op lists with ``policy``; None if the policy deadlocks under the memory limit."""
    pr = problem
    n_st, m, split = pr.num_stages, pr.m, pr.split
    block = n_st * m
    total = len(pr.kinds) * block
    stage_rank, cost, act, p2p = pr.stage_rank, pr.cost, pr.act, pr.p2p
    later_need, entry = pr.later_need, pr.entry
    limit = pr.memory_limit * policy.memory_scale + _EPS
    headroom = policy.entry_headroom
    entry_cap = policy.entry_cap
    last = n_st - 1
    mb_key = _mb_keys(m, policy)
    entry_order = sorted(range(m), key=mb_key.__getitem__)
    f_sign = -1 if policy.deep_forward_first else 1
    b_sign = -1 if policy.deep_backward_first else 1
    forward_first = policy.forward_first
    weight_wait = policy.weight_wait
    weight_first = policy.weight_first
    due = pr.due_times(policy) if policy.period > 0 or policy.critical_path else None
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
    wgt: list[list[tuple[float, int, int]]] = [[] for _ in range(n_ranks)]
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
        if (
            entry_cap > 0
            and entry[s]
            and pr.next_local_gap[s]
            and pending_later[s] >= entry_cap * pr.next_local_gap[s]
        ):
            return False
        if entry[s]:
            reserve = later_need[s]
            for t in local[r]:
                if pending_later[t] and later_need[t] > reserve:
                    reserve = later_need[t]
            need += reserve * headroom
        return need <= limit

    def _rank_key(o: int) -> tuple[int, float, float]:
        # The policy's preference among F and I ops (lower is preferred).
        k, rest_o = divmod(o, block)
        s_o, mb_o = divmod(rest_o, m)
        if due is not None:
            return (0, due[o], mb_key[mb_o])
        if k == 0:
            return (0 if forward_first else 1, f_sign * s_o, mb_key[mb_o])
        return (1 if forward_first else 0, b_sign * s_o, mb_key[mb_o])

    def _better_arrival(chosen_op: int, window: float) -> float:
        """Earliest arrival within the window of an op the policy prefers over ``chosen_op``."""
        mine = _rank_key(chosen_op)
        best_t = inf
        for o in bwd[r]:
            if t + _EPS < ready_at[o] <= window and ready_at[o] < best_t and _rank_key(o) < mine:
                best_t = ready_at[o]
        for o in fwd[r]:
            if (
                t + _EPS < ready_at[o] <= window
                and ready_at[o] < best_t
                and _rank_key(o) < mine
                and admissible(o // m, r)
            ):
                best_t = ready_at[o]
        return best_t

    lookahead = policy.lookahead
    done = 0
    last_end = 0.0
    waited = False
    grad_kind = 2 if split else 1
    last_grad = [0.0] * n_st
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
                key = (due[o] if due else b_sign * ((o - block) // m), mb_key[o % m])
                if best_b is None or key < best_b[0]:
                    best_b = (key, o)
            elif ready_at[o] < nxt:
                nxt = ready_at[o]
        f_cands = []
        for o in fwd[r]:
            if ready_at[o] <= horizon:
                f_cands.append((due[o] if due else f_sign * (o // m), mb_key[o % m], o))
            elif ready_at[o] < nxt:
                nxt = ready_at[o]
        if r == rank0 and next_entry < m:
            mb0 = entry_order[next_entry]
            f_cands.append((due[mb0] if due else 0, mb_key[mb0], mb0))
        best_f = -1
        if f_cands:
            f_cands.sort()
            for cand in f_cands:
                if admissible(cand[2] // m, r):
                    best_f = cand[2]
                    break
        if due is not None:
            best_due = inf
            if best_b is not None:
                chosen, best_due = best_b[1], due[best_b[1]]
            if best_f >= 0 and due[best_f] < best_due:
                chosen, best_due = best_f, due[best_f]
            if wgt[r]:
                w = wgt[r][0][2]
                if due[w] < best_due or (chosen < 0 and (f_cands or nxt - t >= weight_wait * cost[w] - _EPS)):
                    chosen = w
                elif chosen < 0:
                    waited = True
                    push(events, (nxt, r))
                    continue
        elif forward_first and best_f >= 0:
            chosen = best_f
        elif forward_first and f_cands and wgt[r]:
            # An arrived forward waits for memory: run the W that frees it (ZBV's F-I-W rhythm).
            chosen = wgt[r][0][2]
        elif best_b is not None:
            chosen = best_b[1]
        elif weight_first and wgt[r]:
            chosen = wgt[r][0][2]
        elif best_f >= 0:
            chosen = best_f
        elif wgt[r]:
            w = wgt[r][0][2]
            if f_cands or nxt - t >= weight_wait * cost[w] - _EPS:
                chosen = w
            else:
                waited = True
                push(events, (nxt, r))
                continue
        if chosen < 0:
            if nxt < inf:
                push(events, (nxt, r))
            continue
        if lookahead > 0 and chosen < 2 * block and nxt < t + lookahead * cost[chosen]:
            wait_for = _better_arrival(chosen, t + lookahead * cost[chosen])
            if wait_for < inf:
                waited = True
                push(events, (wait_for, r))
                continue
        kind_index, rest = divmod(chosen, block)
        s = rest // m
        end = t + cost[chosen]
        free_at[r] = end
        if end > last_end:
            last_end = end
        if kind_index == grad_kind and end > last_grad[s]:
            last_grad[s] = end
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
            heapq.heappop(wgt[r])  # the chosen W is always the heap's minimum
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
                if k == 2:
                    # Heap by the policy's W key; the counter keeps equal keys first-come first-served.
                    push(wgt[o_rank], (due[o] if due is not None else mb_key[o % m], done, o))
                else:
                    (fwd if k == 0 else bwd)[o_rank].append(o)
                if o_rank != r:
                    at = ready_at[o] if ready_at[o] > free_at[o_rank] else free_at[o_rank]
                    push(events, (at, o_rank))
    if done != total:
        return None
    return Schedule(orders, last_end, free_at, last_grad, not waited)


def _mb_keys(m: int, policy: Policy) -> list[float]:
    if policy.jitter <= 0:
        return [float(mb) for mb in range(m)]
    import random

    rng = random.Random(policy.seed)
    return [mb + rng.uniform(-policy.jitter, policy.jitter) for mb in range(m)]
