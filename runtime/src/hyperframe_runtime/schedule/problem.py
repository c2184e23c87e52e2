"""Planning inputs for the list scheduler: the search :class:`Policy` and the integer-indexed
:class:`Problem` (ops are integers ``(kind * stages + stage) * m + microbatch`` for speed).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Action, OpKind, Placement

__all__ = ["Policy", "Problem"]


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
    weight_first: bool = False
    """Run a pending W before any forward (keeps memory low and the steady state regular, like
    ZBV's F-I-W blocks); False runs W only when nothing else has arrived."""
    period: float = 0.0
    """0 picks ops by the kind rules above. Above 0, every op gets a due time from an ideal
    periodic pipeline (micro-batch k enters at ``k * period * T``, T = the busiest rank's work per
    micro-batch; each op is due at its critical-path offset after that) and a free rank runs the
    arrived op that is due first. This interleaves new forwards with backwards like 1F1B/ZB."""
    weight_slack: float = 1.0
    """Due-time mode: a W is due ``weight_slack * T`` after its I (how long it may be delayed)."""
    critical_path: bool = False
    """Due-time mode variant: an op of micro-batch k is due at ``k * period * T - bottom level``,
    the bottom level being the longest path from the op to the end of the frame. A free rank then
    runs the most critical arrived op, aged by micro-batch index (``period`` 0: pure critical path).
    W ops have the smallest bottom level, so they fill bubbles."""
    entry_cap: float = 0.0
    """Above 0, a rank holds at most ``entry_cap * d`` micro-batches that entered its first stage
    and have not yet reached its next stage ``d`` stages later (the V's warm-up depth, as in ZBV);
    0 leaves admission to the memory budget alone."""
    lookahead: float = 0.0
    """Leave the rank idle for up to ``lookahead * cost`` of the op it would run, when an op it
    prefers (a deeper forward, or a backward) is known to arrive within that time. Non-delay list
    scheduling cannot wait; with comm latency, waiting for the deeper op is often better."""
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
        self.next_local_gap = [_next_local_gap(self, s) for s in range(s_count)]
        self.entry = [all(self.stage_rank[t] != self.stage_rank[s] for t in range(s)) for s in range(s_count)]

    def due_times(self, policy: Policy) -> list[float]:
        """Per-op due times of the ideal periodic pipeline (see ``Policy.period``)."""
        n_st, m = self.num_stages, self.m
        block = n_st * m
        rank_work = [0.0] * self.num_ranks
        for s in range(n_st):
            per_mb = sum(self.cost[k * block + s * m] for k in range(len(self.kinds)))
            rank_work[self.stage_rank[s]] += per_mb
        period = policy.period * max(rank_work)
        hop = [
            self.p2p if s > 0 and self.stage_rank[s] != self.stage_rank[s - 1] else 0.0 for s in range(n_st)
        ]
        f_off = [0.0] * n_st
        for s in range(1, n_st):
            f_off[s] = f_off[s - 1] + self.cost[(s - 1) * m] + hop[s]
        b_off = [0.0] * n_st
        b_off[n_st - 1] = f_off[n_st - 1] + self.cost[(n_st - 1) * m]
        for s in range(n_st - 2, -1, -1):
            b_off[s] = b_off[s + 1] + self.cost[block + (s + 1) * m] + hop[s + 1]
        due = [0.0] * (len(self.kinds) * block)
        if policy.critical_path:
            return self._critical_due(period, hop)
        w_slack = policy.weight_slack * max(rank_work)
        for s in range(n_st):
            for mb in range(m):
                base = mb * period
                due[s * m + mb] = base + f_off[s]
                due[block + s * m + mb] = base + b_off[s]
                if self.split:
                    due[2 * block + s * m + mb] = base + b_off[s] + self.cost[block + s * m] + w_slack
        return due

    def _critical_due(self, period: float, hop: list[float]) -> list[float]:
        n_st, m = self.num_stages, self.m
        block = n_st * m
        c = self.cost
        split = self.split
        b_level = [0.0] * n_st  # I (or B) of stage s: I_s, then W_s or the gradient to s-1
        for s in range(n_st):
            own_w = c[2 * block + s * m] if split else 0.0
            down = hop[s] + b_level[s - 1] if s > 0 else 0.0
            b_level[s] = c[block + s * m] + max(own_w, down)
        f_level = [0.0] * n_st
        for s in range(n_st - 1, -1, -1):
            up = hop[s + 1] + f_level[s + 1] if s < n_st - 1 else 0.0
            f_level[s] = c[s * m] + max(up, b_level[s])
        due = [0.0] * (len(self.kinds) * block)
        for s in range(n_st):
            w_level = c[2 * block + s * m] if split else 0.0
            for mb in range(m):
                age = mb * period
                due[s * m + mb] = age - f_level[s]
                due[block + s * m + mb] = age - b_level[s]
                if split:
                    due[2 * block + s * m + mb] = age - w_level
        return due

    def op(self, kind_index: int, stage: int, mb: int) -> int:
        return (kind_index * self.num_stages + stage) * self.m + mb

    def action(self, op: int) -> Action:
        return _action_table(self.num_stages, self.m, self.kinds)[op]

    def actions(self, ops: list[int]) -> list[Action]:
        """The Actions of integer ops, in order."""
        table = _action_table(self.num_stages, self.m, self.kinds)
        return [table[o] for o in ops]


@functools.lru_cache(maxsize=4)
def _action_table(num_stages: int, m: int, kinds: tuple[OpKind, ...]) -> tuple[Action, ...]:
    # Building ~100k Action objects is a third of a large plan's time; a re-plan of the same
    # pipeline (every few frames in the runtime) reuses them. Actions are frozen, so sharing is safe.
    return tuple(Action(s, kind, mb) for kind in kinds for s in range(num_stages) for mb in range(m))


def _next_local_gap(pr: Problem, s: int) -> int:
    r = pr.stage_rank[s]
    for t in range(s + 1, pr.num_stages):
        if pr.stage_rank[t] == r:
            return t - s
    return 0


def _prev_local_stage(pr: Problem, s: int) -> int:
    r = pr.stage_rank[s]
    for t in range(s - 1, -1, -1):
        if pr.stage_rank[t] == r:
            return t
    return -1
