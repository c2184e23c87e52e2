"""Pure-Python ports of torch's schedule order generators (compute actions only).

The planner seeds its search with torch's schedules (:mod:`.seeds`). Torch builds them slowly at
scale (about 1 s for ZBV at p = 64, m = 256, most of it building and lowering ``_Action`` objects),
which would eat the planning budget, so the orders are regenerated here as plain
``(stage, kind, microbatch)`` tuples. Each port follows torch 2.13's
``_calculate_single_rank_operations`` of the same schedule; explicit bubbles (``None``) and
bookkeeping actions are dropped, as in :func:`.baselines.baseline`. A unit test checks every
port against torch's own orders over a grid of (p, m), so a change in torch shows up there.

Every torch schedule HyperFrame compares against is ported, so seeding never imports torch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

__all__ = ["PORTED", "RankOps", "dualpipev", "gpipe", "interleaved", "looped_bfs", "one_f_one_b", "zbv"]

RankOps = list[list[tuple[int, str, int]]]
"""Per rank, the ``(stage, kind, microbatch)`` of each compute action in order (kind F/I/W/B)."""


def gpipe(p: int, m: int) -> RankOps:
    """GPipe: every forward, then every full backward, in micro-batch order."""
    return [[(r, "F", mb) for mb in range(m)] + [(r, "B", mb) for mb in range(m)] for r in range(p)]


def one_f_one_b(p: int, m: int) -> RankOps:
    """Textbook 1F1B (see :func:`.baselines.textbook_1f1b`)."""
    out: RankOps = []
    for r in range(p):
        warmup = min(p - 1 - r, m)
        ops = [(r, "F", mb) for mb in range(warmup)]
        for i in range(m - warmup):
            ops += [(r, "F", warmup + i), (r, "B", i)]
        ops += [(r, "B", mb) for mb in range(m - warmup, m)]
        out.append(ops)
    return out


def looped_bfs(p: int, m: int, v: int = 2) -> RankOps:
    """LoopedBFS: all forwards stage by stage, then all backwards in reverse."""
    out: RankOps = []
    for r in range(p):
        stages = range(r, p * v, p)
        ops = [(s, "F", mb) for s in stages for mb in range(m)]
        ops += [(s, "B", mb) for s in reversed(stages) for mb in reversed(range(m))]
        out.append(ops)
    return out


def interleaved(p: int, m: int, v: int = 2, *, zero_bubble: bool = False) -> RankOps | None:
    """Interleaved1F1B, or InterleavedZeroBubble (ZB1P) with ``zero_bubble``; None where torch
    refuses (m not a multiple of its number of rounds)."""
    rounds = max(1, m // p)
    per_round = m // rounds
    if m % rounds:
        return None
    factor = 1 if zero_bubble else 2
    out: RankOps = []
    for r in range(p):
        warmup = min((v - 1) * per_round + factor * (p - 1 - r), m * v)
        total = v * m

        def fwd_stage(step: int, r: int = r) -> int:
            return ((step // per_round) % v) * p + r

        def bwd_stage(step: int, r: int = r, warmup: int = warmup) -> int:
            return (v - 1 - ((step - warmup) // per_round) % v) * p + r

        out.append(_one_f_one_b_ops(warmup, total, fwd_stage, bwd_stage, r if zero_bubble else -1))
    return out


def _one_f_one_b_ops(
    warmup: int,
    total: int,
    fwd_stage: Callable[[int], int],
    bwd_stage: Callable[[int], int],
    one_f_one_b_mbs: int,
) -> list[tuple[int, str, int]]:
    # torch's _get_1f1b_rank_ops; one_f_one_b_mbs < 0 means no zero bubble (fused B, no W).
    zero_bubble = one_f_one_b_mbs >= 0
    fwd_mb: defaultdict[int, int] = defaultdict(int)
    bwd_mb: defaultdict[int, int] = defaultdict(int)
    w_mb: defaultdict[int, int] = defaultdict(int)
    backward_kind = "I" if zero_bubble else "B"
    ops: list[tuple[int, str, int]] = []
    backward_steps: list[int] = []
    weights = 0

    def take(counter: defaultdict[int, int], stage: int) -> int:
        index = counter[stage]
        counter[stage] = index + 1
        return index

    # Steps: warm-up forwards, then forward + backward (+ W) until every forward ran, then the
    # remaining backwards (+ W), then the W still owed.
    for step in range(total + warmup):
        if step < total:
            s = fwd_stage(step)
            ops.append((s, "F", take(fwd_mb, s)))
        if step < warmup:
            continue
        s = bwd_stage(step)
        ops.append((s, backward_kind, take(bwd_mb, s)))
        backward_steps.append(step)
        if zero_bubble and step - warmup >= one_f_one_b_mbs:
            s = bwd_stage(backward_steps[weights])
            ops.append((s, "W", take(w_mb, s)))
            weights += 1
    while zero_bubble and weights < len(backward_steps):
        s = bwd_stage(backward_steps[weights])
        ops.append((s, "W", take(w_mb, s)))
        weights += 1
    return ops


def zbv(p: int, m: int) -> RankOps:
    """ZBVZeroBubble on the V placement (chunks r and 2p-1-r on rank r)."""
    n_micro = max(2 * p - 1, m)
    out: RankOps = []
    for r in range(p):
        c0, c1 = r, 2 * p - 1 - r
        f0 = f1 = b0 = b1 = 0
        ops: list[tuple[int, str, int]] = []
        for _ in range(2 * (p - r) - 1):
            ops.append((c0, "F", f0))
            f0 += 1
        for _ in range(r):
            ops += [(c1, "F", f1), (c0, "F", f0)]
            f1 += 1
            f0 += 1
        for _ in range(p - r):
            ops += [(c1, "F", f1), (c1, "I", b1), (c1, "W", b1)]
            f1 += 1
            b1 += 1
        while f1 < f0 or f0 < n_micro:
            if f0 < n_micro:
                ops.append((c0, "F", f0))
                f0 += 1
            ops += [(c0, "I", b0), (c0, "W", b0), (c1, "F", f1), (c1, "I", b1), (c1, "W", b1)]
            b0 += 1
            f1 += 1
            b1 += 1
        w0, w1 = b0, b1
        for _ in range(r):
            ops += [(c0, "I", b0), (c1, "I", b1)]
            b0 += 1
            b1 += 1
        for _ in range(p - r):
            ops += [(c0, "I", b0), (c0, "W", w0)]
            b0 += 1
            w0 += 1
        ops += [(c1, "W", w) for w in range(w1, b1)]
        ops += [(c0, "W", w) for w in range(w0, b0)]
        out.append([op for op in ops if op[2] < m])
    return out


def dualpipev(p: int, m: int) -> RankOps | None:
    """DualPipeV on the V placement; None for m < 2p (torch refuses). Torch's overlapped F+B
    pairs are flattened into their two actions, F first, as :func:`.baselines.baseline` does."""
    if m < 2 * p:
        return None
    return [_dualpipev_rank(p, m, r) for r in range(p)]


def _dualpipev_rank(p: int, m: int, r: int) -> list[tuple[int, str, int]]:
    s0, s1 = r, 2 * p - 1 - r
    counters: dict[tuple[int, str], int] = {}
    weights: list[tuple[int, int]] = []
    ops: list[tuple[int, str, int]] = []

    def add(stage: int, kind: str) -> None:
        key = (stage, "I" if kind == "B" else kind)
        mb = counters.get(key, 0)
        ops.append((stage, kind, mb))
        if kind == "B":  # a full backward counts as both its I and its W
            counters[key] = mb + 1
            counters[(stage, "W")] = counters.get((stage, "W"), 0) + 1
            return
        if kind == "I":
            weights.append((stage, mb))
        counters[key] = mb + 1

    def add_weight() -> None:
        if weights:
            stage, mb = weights.pop(0)
            ops.append((stage, "W", mb))
            counters[(stage, "W")] = counters.get((stage, "W"), 0) + 1

    def overlap(forward: int, backward: int) -> None:
        mb_f, mb_b = counters.get((forward, "F"), 0), counters.get((backward, "I"), 0)
        ops.extend([(forward, "F", mb_f), (backward, "B", mb_b)])
        counters[(forward, "F")] = mb_f + 1
        counters[(backward, "I")] = mb_b + 1
        counters[(backward, "W")] = counters.get((backward, "W"), 0) + 1

    for _ in range((p - r - 1) * 2):
        add(s0, "F")
    for _ in range(r + 1):
        add(s0, "F")
        add(s1, "F")
    for _ in range(p - r - 1):
        add(s1, "I")
        add_weight()
        add(s1, "F")
    for i in range(m - 2 * p + r + 1):
        if i == 0 and r == p - 1:
            add(s0, "F")
            add(s1, "B")
        else:
            overlap(s0, s1)
        overlap(s1, s0)
    for _ in range(p - r - 1):
        add(s1, "B")
        overlap(s1, s0)
    zero_bubble = False
    for i in range(r + 1):
        if i == (r + 1) // 2 and r % 2 == 1:
            zero_bubble = True
        add(s1, "I" if zero_bubble else "B")
        if i == (r + 1) // 2 and r % 2 == 0:
            zero_bubble = True
        add(s0, "I" if zero_bubble else "B")
    for _ in range(p - r - 1):
        add_weight()
        add(s0, "I" if zero_bubble else "B")
    for _ in range(r + 1):
        add_weight()
    return ops


PORTED: dict[str, Callable[[int, int], RankOps | None]] = {
    "GPipe": gpipe,
    "1F1B": one_f_one_b,
    "Interleaved1F1B": lambda p, m: interleaved(p, m),
    "LoopedBFS": looped_bfs,
    "InterleavedZeroBubble": lambda p, m: interleaved(p, m, zero_bubble=True),
    "ZBVZeroBubble": zbv,
    "DualPipeV": dualpipev,
}
"""Baseline name (:data:`.baselines.BASELINE_NAMES`) -> its port."""
