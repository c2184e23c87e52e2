"""Improvement search over per-rank orders: critical-path guided local search.

Orders are lists of integer ops (see :class:`~.listsched.Problem`). Each candidate is replayed
as soon as possible in its order (:func:`replay`); a move is kept when the makespan does not get
worse (ties broken by the sum of rank finish times, which lets the search walk along plateaus).
Moves shift one op earlier or later on its rank; most pick an op on the current critical path.
Orders that break the memory budget or deadlock are rejected. Deterministic for a given seed.
"""

from __future__ import annotations

import random

from hyperframe_runtime.schedule.problem import Problem

__all__ = ["Replay", "improve", "memory_ok", "predecessors_of", "replay"]

_EPS = 1e-9


class Replay:
    """Timing of one ASAP replay: per-op end times and the op each start was bound by."""

    __slots__ = ("binding", "ends", "finish", "makespan", "starts")

    def __init__(
        self, starts: list[float], ends: list[float], binding: list[int], finish: list[float]
    ) -> None:
        self.starts = starts
        self.ends = ends
        self.binding = binding
        self.finish = finish
        self.makespan = max(finish)

    @property
    def score(self) -> tuple[float, float]:
        return (round(self.makespan, 9), round(sum(self.finish), 9))


def predecessors_of(pr: Problem) -> list[tuple[int, ...]]:
    n_st, m = pr.num_stages, pr.m
    block = n_st * m
    last = n_st - 1
    preds: list[tuple[int, ...]] = []
    for kind_index in range(len(pr.kinds)):
        for s in range(n_st):
            for mb in range(m):
                rest = s * m + mb
                if kind_index == 0:
                    preds.append((rest - m,) if s > 0 else ())
                elif kind_index == 1:
                    preds.append((rest,) if s == last else (rest, block + rest + m))
                else:
                    preds.append((block + rest,))
    return preds


def replay(pr: Problem, orders: list[list[int]], preds: list[tuple[int, ...]]) -> Replay | None:
    """ASAP replay of integer orders; None on deadlock."""
    total = len(preds)
    block = pr.num_stages * pr.m
    m = pr.m
    stage_rank, cost, p2p = pr.stage_rank, pr.cost, pr.p2p
    nan = -1.0
    ends = [nan] * total
    starts = [0.0] * total
    binding = [-1] * total
    n_ranks = len(orders)
    pointer = [0] * n_ranks
    free_at = [0.0] * n_ranks
    last_op = [-1] * n_ranks
    waiting: dict[int, list[int]] = {}
    work = list(range(n_ranks - 1, -1, -1))
    done = 0
    while work:
        r = work.pop()
        ops = orders[r]
        i = pointer[r]
        while i < len(ops):
            op = ops[i]
            start = free_at[r]
            bound = last_op[r]
            blocked = -1
            for d in preds[op]:
                t = ends[d]
                if t < 0:
                    blocked = d
                    break
                if stage_rank[(d % block) // m] != r:
                    t += p2p
                if t > start + _EPS:
                    start = t
                    bound = d
            if blocked >= 0:
                waiting.setdefault(blocked, []).append(r)
                break
            end = start + cost[op]
            starts[op] = start
            ends[op] = end
            binding[op] = bound
            free_at[r] = end
            last_op[r] = op
            done += 1
            i += 1
            woken = waiting.pop(op, None)
            if woken:
                work.extend(woken)
        pointer[r] = i
    if done != total:
        return None
    return Replay(starts, ends, binding, free_at)


def memory_ok(pr: Problem, ops: list[int], limit: float) -> bool:
    """True when one rank's ``ops`` never hold more than ``limit`` activation memory."""
    block = pr.num_stages * pr.m
    m = pr.m
    act = pr.act
    used = 0.0
    release = 2 if pr.split else 1
    for op in ops:
        kind_index, rest = divmod(op, block)
        if kind_index == 0:
            used += act[rest // m]
            if used > limit:
                return False
        elif kind_index == release:
            used -= act[rest // m]
    return True


def _critical_ops(pr: Problem, rep: Replay) -> list[int]:
    op = max(range(len(rep.ends)), key=lambda o: (rep.ends[o], -o))
    path = []
    while op >= 0:
        path.append(op)
        op = rep.binding[op]
    return path


def improve(
    pr: Problem, orders: list[list[int]], evaluations: int, seed: int = 0
) -> tuple[list[list[int]], float]:
    """Locally improve ``orders`` within ``evaluations`` replays; return the best and its makespan."""
    preds = predecessors_of(pr)
    current = replay(pr, orders, preds)
    if current is None:
        raise ValueError("improve() needs deadlock-free starting orders")
    orders = [list(ops) for ops in orders]
    rank_of_op = [0] * len(preds)
    block = pr.num_stages * pr.m
    for r, ops in enumerate(orders):
        for op in ops:
            rank_of_op[op] = r
    limit = pr.memory_limit + _EPS
    rng = random.Random(seed)
    critical = _critical_ops(pr, current)
    weight_kind = 2 if pr.split else -1
    gaps = _gaps(orders, current)
    for _ in range(evaluations):
        roll = rng.random()
        if gaps and weight_kind > 0 and roll < 0.5:
            # Delay a W into a bubble: the ops it jumps over start earlier, the W fills the gap.
            r, k = rng.choice(gaps)
            ops = orders[r]
            earlier = [i for i in range(max(0, k - 8), k) if ops[i] // block == weight_kind]
            if not earlier:
                continue
            i = rng.choice(earlier)
            op, j = ops[i], k - 1
        else:
            if critical and roll < 0.85:
                op = rng.choice(critical)
                shift = -rng.randint(1, 3)
            else:
                r = rng.randrange(len(orders))
                if not orders[r]:
                    continue
                op = rng.choice(orders[r])
                shift = rng.choice((-3, -2, -1, 1, 2, 3))
            r = rank_of_op[op]
            ops = orders[r]
            i = ops.index(op)
            j = min(max(i + shift, 0), len(ops) - 1)
        if j == i:
            continue
        candidate = ops[:i] + ops[i + 1 :]
        candidate.insert(j, op)
        if not _same_rank_order_ok(candidate, i, j, op, block, pr.m):
            continue
        if not memory_ok(pr, candidate, limit):
            continue
        orders[r] = candidate
        trial = replay(pr, orders, preds)
        if trial is not None and trial.score <= current.score:
            current = trial
            critical = _critical_ops(pr, current)
            gaps = _gaps(orders, current)
        else:
            orders[r] = ops
    return orders, current.makespan


def _gaps(orders: list[list[int]], rep: Replay) -> list[tuple[int, int]]:
    """(rank, position) of every op that starts after an idle gap on its rank."""
    found = []
    for r, ops in enumerate(orders):
        for k in range(1, len(ops)):
            if rep.starts[ops[k]] > rep.ends[ops[k - 1]] + _EPS:
                found.append((r, k))
    return found


def _same_rank_order_ok(ops: list[int], i: int, j: int, op: int, block: int, m: int) -> bool:
    """Cheap check that the moved op did not jump over its own F/I/W chain on this rank."""
    lo, hi = min(i, j), max(i, j)
    rest = op % block
    for k in range(lo, hi + 1):
        other = ops[k]
        if other != op and other % block == rest:
            return False
    return True
