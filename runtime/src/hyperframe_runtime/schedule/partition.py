"""Contiguous layer partitioning for heterogeneous devices.

Given the cost of every layer (F + I + W of one micro-batch, on a reference device) and each
rank's time multiplier, :func:`partition_layers` splits the layers into one contiguous stage per
rank (stage r on rank r) so that the slowest stage, ``rank_slowdown[r] * sum(layers of r)``, is as
fast as possible. It is an exact dynamic programme, O(p * L^2). A slow device simply gets fewer
layers; that is what lets a mixed cluster run at the speed of its total compute instead of
p times its slowest device.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import ScheduleError

__all__ = ["Partition", "partition_costs", "partition_layers", "rank_loads", "vshape_partition"]


@dataclass(frozen=True)
class Partition:
    """Stage s holds layers ``boundaries[s]:boundaries[s + 1]``."""

    boundaries: tuple[int, ...]
    stage_times: tuple[float, ...]
    """Time of each stage per micro-batch on its own device."""

    @property
    def num_stages(self) -> int:
        return len(self.boundaries) - 1

    @property
    def bottleneck(self) -> float:
        return max(self.stage_times)

    def layers_of(self, stage: int) -> range:
        return range(self.boundaries[stage], self.boundaries[stage + 1])


def partition_layers(layer_costs: Sequence[float], rank_slowdown: Sequence[float]) -> Partition:
    """Exact min-bottleneck contiguous split of ``layer_costs`` over ``len(rank_slowdown)`` ranks.

    Every rank gets at least one layer. Ties go to the split with the earliest boundaries, so the
    result is deterministic.
    """
    n_layers, p = len(layer_costs), len(rank_slowdown)
    if p < 1:
        raise ScheduleError("rank_slowdown: empty; give one time multiplier per rank")
    if n_layers < p:
        raise ScheduleError(
            f"layer_costs: {n_layers} layers cannot fill {p} stages; every rank needs at least one layer"
        )
    if any(c < 0 for c in layer_costs) or any(s <= 0 for s in rank_slowdown):
        raise ScheduleError("layer_costs must be >= 0 and rank_slowdown > 0")
    prefix = [0.0]
    for c in layer_costs:
        prefix.append(prefix[-1] + c)
    inf = float("inf")
    # best[k][i]: smallest bottleneck putting layers [0, i) on ranks 0..k-1; choice[k][i]: last cut.
    best = [[inf] * (n_layers + 1) for _ in range(p + 1)]
    choice = [[0] * (n_layers + 1) for _ in range(p + 1)]
    best[0][0] = 0.0
    for k in range(1, p + 1):
        slow = rank_slowdown[k - 1]
        for i in range(k, n_layers - (p - k) + 1):
            for j in range(k - 1, i):
                value = max(best[k - 1][j], slow * (prefix[i] - prefix[j]))
                if value < best[k][i] - 1e-12:
                    best[k][i] = value
                    choice[k][i] = j
    cuts = [n_layers]
    for k in range(p, 0, -1):
        cuts.append(choice[k][cuts[-1]])
    boundaries = tuple(reversed(cuts))
    times = tuple(rank_slowdown[s] * (prefix[boundaries[s + 1]] - prefix[boundaries[s]]) for s in range(p))
    return Partition(boundaries=boundaries, stage_times=times)


def vshape_partition(layer_costs: Sequence[float], rank_slowdown: Sequence[float]) -> Partition:
    """Min-max rank-load split into 2p chunks for the V placement (chunks r and 2p-1-r on rank r).

    Both chunks of a rank are sized together: the load of rank r is
    ``rank_slowdown[r] * (cost(chunk r) + cost(chunk 2p-1-r))``, and the largest rank load is
    minimised over every contiguous split into 2p non-empty chunks. Put the embedding's cost in
    the first layer and the output head's in the last: both land on rank 0 of the V, which then
    gets fewer blocks.

    Ranks r..p-1 of a V always hold one contiguous run of layers, so the search goes from the
    outside in: a bisection on the target load T, and for each T the set of runs rank r can leave
    to the ranks inside it (only the smallest runs are kept; a smaller run is never harder). The
    split within rank p-1 (its two chunks are adjacent) halves its cost.
    """
    n_layers, p = len(layer_costs), len(rank_slowdown)
    if p < 1:
        raise ScheduleError("rank_slowdown: empty; give one time multiplier per rank")
    if n_layers < 2 * p:
        raise ScheduleError(
            f"layer_costs: {n_layers} layers cannot fill the V's {2 * p} chunks; every chunk needs a layer"
        )
    if any(c < 0 for c in layer_costs) or any(x <= 0 for x in rank_slowdown):
        raise ScheduleError("layer_costs must be >= 0 and rank_slowdown > 0")
    prefix = [0.0]
    for cost in layer_costs:
        prefix.append(prefix[-1] + cost)
    total = prefix[-1]
    lo = total / sum(1.0 / x for x in rank_slowdown)
    hi = max(rank_slowdown) * total
    best = _v_feasible(prefix, rank_slowdown, hi)
    assert best is not None  # one rank may carry everything it is given at the slowest speed
    for _ in range(60):
        if hi - lo <= 1e-9 * max(hi, 1e-12):
            break
        mid = (lo + hi) / 2
        found = _v_feasible(prefix, rank_slowdown, mid)
        if found is None:
            lo = mid
        else:
            best, hi = found, _v_load(prefix, rank_slowdown, found)
    best = _balanced_v(prefix, rank_slowdown, hi) or best
    chunk_rank = [c if c < p else 2 * p - 1 - c for c in range(2 * p)]
    times = tuple(
        rank_slowdown[chunk_rank[c]] * (prefix[best[c + 1]] - prefix[best[c]]) for c in range(2 * p)
    )
    return Partition(boundaries=best, stage_times=times)


def rank_loads(partition: Partition, rank_slowdown: Sequence[float]) -> tuple[float, ...]:
    """Each rank's time per micro-batch under a V split (``stage_times`` of its two chunks)."""
    p = len(rank_slowdown)
    return tuple(partition.stage_times[r] + partition.stage_times[2 * p - 1 - r] for r in range(p))


def _v_load(prefix: list[float], slow: Sequence[float], bounds: tuple[int, ...]) -> float:
    p = len(slow)
    return max(
        slow[r]
        * (
            prefix[bounds[r + 1]]
            - prefix[bounds[r]]
            + prefix[bounds[2 * p - r]]
            - prefix[bounds[2 * p - 1 - r]]
        )
        for r in range(p)
    )


def _v_feasible(
    prefix: list[float], slow: Sequence[float], target: float, run: tuple[int, int] | None = None
) -> tuple[int, ...] | None:
    """V chunk boundaries of layers ``run`` (default: all) over the ranks of ``slow`` (outermost
    first) with every rank load <= ``target``, or None if there are none."""
    p = len(slow)
    start, n = run if run is not None else (0, len(prefix) - 1)
    eps = 1e-12 * max(prefix[-1], 1.0)
    # states: left end a -> (right end b, parent left end) of the run left to ranks r..p-1
    states: dict[int, tuple[int, int]] = {start: (n, -1)}
    history: list[dict[int, tuple[int, int]]] = []
    for r in range(p - 1):
        cap = target / slow[r] + eps
        inner = 2 * (p - 1 - r)  # layers the ranks inside need at least
        nxt: dict[int, tuple[int, int]] = {}
        for a, (b, _) in states.items():
            for a2 in range(a + 1, b - inner):
                left = prefix[a2] - prefix[a]
                if left > cap:
                    break
                # smallest b2 with prefix[b] - prefix[b2] <= cap - left, one layer at least
                b2 = max(bisect.bisect_left(prefix, prefix[b] - (cap - left), 0, b), a2 + inner)
                if b2 > b - 1:
                    continue
                if a2 not in nxt or b2 < nxt[a2][0]:
                    nxt[a2] = (b2, a)
        states = _smallest_runs(nxt)
        if not states:
            return None
        history.append(states)
    cap = target / slow[p - 1] + eps
    finals = [a for a, (b, _) in states.items() if b - a >= 2 and prefix[b] - prefix[a] <= cap]
    if not finals:
        return None
    a = max(finals)
    b = states[a][0]
    half = prefix[a] + (prefix[b] - prefix[a]) / 2
    mid = min(max(bisect.bisect_left(prefix, half, a, b), a + 1), b - 1)
    # Walk back: level r maps rank r+1's left end to (its right end, rank r's left end).
    lefts, rights = [a], [b]
    for level in range(len(history) - 1, -1, -1):
        parent = history[level][lefts[-1]][1]
        lefts.append(parent)
        rights.append(history[level - 1][parent][0] if level > 0 else n)  # n: the run's end
    return (*reversed(lefts), mid, *rights)


def _balanced_v(prefix: list[float], slow: Sequence[float], target: float) -> tuple[int, ...] | None:
    """A V split within ``target`` whose two chunks per rank are as even as the target allows.

    Outside in, each rank takes the most even (down chunk, up chunk) pair whose remaining run the
    inner ranks can still carry. Even chunks keep a V schedule's warm-up memory low: ZBV runs
    2(p - r) - 1 forwards of rank r's down chunk before its first backward.
    """
    p, n = len(slow), len(prefix) - 1
    eps = 1e-12 * max(prefix[-1], 1.0)
    a, b = 0, n
    lefts, rights = [0], [n]
    for r in range(p - 1):
        cap = target / slow[r] + eps
        inner = 2 * (p - 1 - r)
        options: list[tuple[float, int, int]] = []
        for a2 in range(a + 1, b - inner):
            left = prefix[a2] - prefix[a]
            if left > cap:
                break
            lowest = max(bisect.bisect_left(prefix, prefix[b] - (cap - left), 0, b), a2 + inner)
            options.extend((abs(left - prefix[b] + prefix[b2]), a2, b2) for b2 in range(lowest, b))
        options.sort()
        for _, a2, b2 in options:
            if _v_feasible(prefix, slow[r + 1 :], target, (a2, b2)) is not None:
                a, b = a2, b2
                break
        else:
            return None
        lefts.append(a)
        rights.append(b)
    half = prefix[a] + (prefix[b] - prefix[a]) / 2
    mid = min(max(bisect.bisect_left(prefix, half, a, b), a + 1), b - 1)
    return (*lefts, mid, *reversed(rights))


def _smallest_runs(states: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    # Keep a run [a, b) only if no kept run lies inside it (larger a and smaller-or-equal b).
    kept: dict[int, tuple[int, int]] = {}
    smallest_b = None
    for a in sorted(states, reverse=True):
        b = states[a][0]
        if smallest_b is None or b < smallest_b:
            kept[a] = states[a]
            smallest_b = b
    return kept


def partition_costs(
    partition: Partition,
    *,
    layer_forward: Sequence[float],
    layer_backward_input: Sequence[float],
    layer_backward_weight: Sequence[float],
    layer_activation: Sequence[float] | None = None,
    rank_slowdown: Sequence[float] = (),
    p2p: float = 0.0,
) -> CostModel:
    """The per-stage cost model of a partition (``rank_slowdown`` is per rank of the placement)."""

    def per_stage(values: Sequence[float]) -> tuple[float, ...]:
        return tuple(sum(values[i] for i in partition.layers_of(s)) for s in range(partition.num_stages))

    return CostModel(
        forward=per_stage(layer_forward),
        backward_input=per_stage(layer_backward_input),
        backward_weight=per_stage(layer_backward_weight),
        activation=per_stage(layer_activation) if layer_activation is not None else (),
        rank_slowdown=tuple(rank_slowdown),
        p2p=p2p,
    )
