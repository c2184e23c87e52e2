"""The cost-model pipeline planner.

``plan()`` builds per-rank orders in three steps:

0. **Torch's schedules as seeds** (:mod:`.seeds`): every torch schedule on the same placement
   whose orders fit the memory limit is replayed and is a candidate. The best candidate wins, so
   the plan is never worse than those schedules in this cost model, at any budget; if a seed
   already meets LB_tight, the search stops there.
1. **Priority list scheduling** (:mod:`.listsched`): an event-driven construction in which every
   free rank runs the most urgent op that has arrived. Input-backwards (I) carry the critical path
   back to stage 0 and go first; forwards are admitted while the memory budget allows; weight
   backwards (W) are split off and delayed to fill bubbles (the zero-bubble idea). The V-shape
   placement (two stages per rank) is supported and is what lets the pipeline warm up and drain
   with nearly no bubble.
2. **Improvement search**: many policies (priority rules, how long to hold back a W for an
   arriving I, memory headroom, jittered micro-batch priorities) are tried and the best order is
   kept; then a critical-path guided local search (:mod:`.improve`) shifts single ops of the best
   candidate so far (list schedule or seed), e.g. delays a W into a bubble, while the budget lasts.

The search is deterministic: the time budget is turned into a fixed number of candidate
evaluations from the problem size, never measured with a clock, so every rank that plans from the
same all-gathered costs gets the identical plan.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.improve import improve, memory_ok, predecessors_of, replay
from hyperframe_runtime.schedule.ir import Orders, Placement, ScheduleError
from hyperframe_runtime.schedule.listsched import Schedule, list_schedule
from hyperframe_runtime.schedule.problem import Policy, Problem
from hyperframe_runtime.schedule.seeds import seed_ops, seed_orders
from hyperframe_runtime.schedule.simulate import allreduce_finish, lb_tight

__all__ = [
    "Plan",
    "default_memory_limit",
    "evaluation_budget",
    "minimum_memory_limit",
    "one_f_one_b_peaks",
    "plan",
]

# Rough cost of one list-schedule evaluation per op on a slow CPU. Used only to turn the time
# budget into a deterministic evaluation count; it never reads a clock.
_SECONDS_PER_OP = 8e-6
_SECONDS_PER_REPLAY_OP = 1.5e-6
_MAX_IMPROVE_STEPS = 3000
_JITTER_SEEDS = 64
_MIN_CONSTRUCT = 1


@dataclass(frozen=True)
class Plan:
    """A planned frame: who runs what, in which order, and what the cost model predicts."""

    orders: Orders
    placement: Placement
    num_microbatches: int
    predicted_makespan: float
    """Makespan of ``orders`` replayed by :func:`simulate` on the planning costs."""
    lower_bound: float
    """LB_tight for the same costs; ``predicted_makespan / lower_bound`` is the plan's quality."""
    memory_limit: float
    """Per-rank activation budget the plan respects (``costs.activation`` units)."""
    policy: Policy | None
    """The list-scheduling policy that produced the orders (None for a torch seed)."""
    source: str = "list schedule"
    """Which candidate won: ``list schedule``, ``torch NAME`` (a seed), maybe ``+ local search``."""


def _rank_activation(costs: CostModel, placement: Placement) -> list[float]:
    return [sum(costs.activation_of(s) for s in placement.stages_of(r)) for r in range(placement.num_ranks)]


def one_f_one_b_peaks(costs: CostModel, placement: Placement, num_microbatches: int) -> tuple[float, ...]:
    """1F1B's peak of each rank: rank r of 1F1B holds min(m, p - r) micro-batches of everything
    it owns, in ``costs.activation`` units."""
    p = placement.num_ranks
    per_rank = _rank_activation(costs, placement)
    return tuple(min(num_microbatches, p - r) * per_rank[r] for r in range(p))


def default_memory_limit(costs: CostModel, placement: Placement, num_microbatches: int) -> float:
    """1F1B's peak: the largest of :func:`one_f_one_b_peaks` (rank 0's for even stages), per
    rank, in ``costs.activation`` units."""
    return max(one_f_one_b_peaks(costs, placement, num_microbatches))


def minimum_memory_limit(costs: CostModel, placement: Placement) -> float:
    """The smallest budget that can run at all: one micro-batch alive on every stage of a rank."""
    return max(_rank_activation(costs, placement))


def _rules(
    ff: bool, dff: bool, dbf: bool, ww: float, eh: float, wf: bool, la: float = 0.0, ec: float = 0.0
) -> Policy:
    return Policy(
        entry_cap=ec,
        forward_first=ff,
        deep_forward_first=dff,
        deep_backward_first=dbf,
        weight_wait=ww,
        entry_headroom=eh,
        weight_first=wf,
        lookahead=la,
    )


def _candidate_policies(split_backward: bool) -> list[Policy]:
    """Policies in the order they are tried: first the ones that won most often on the bench's
    cost profiles (so a small budget already gets them), then a systematic grid."""
    core = [
        _rules(False, True, False, 0.0, 1.0, False),
        _rules(True, True, False, 1.0, 0.0, False),
        _rules(True, True, False, 1.0, 0.0, False, 1.0, 1.0),
        _rules(True, True, False, 1.0, 1.0, False, 0.0, 1.0),
        _rules(False, False, False, 0.0, 1.0, False),
        _rules(True, True, True, 1.0, 1.0, False, 1.0, 1.0),
        Policy(critical_path=True, period=0.25, entry_headroom=1.0),
        _rules(True, True, False, 1.0, 1.0, False),
        _rules(False, False, False, 1.0, 1.0, False),
        _rules(True, True, True, 0.0, 1.0, False),
        _rules(True, True, False, 0.0, 0.0, True),
        _rules(False, True, True, 0.0, 2.0, False, 1.0),
        Policy(critical_path=True, period=0.5, entry_headroom=1.0),
        Policy(critical_path=True, period=0.1, entry_headroom=1.0),
    ]
    waits = (0.0, 1.0) if split_backward else (0.0,)
    firsts = (False, True) if split_backward else (False,)
    grid = [
        _rules(ff, dff, dbf, ww, eh, wf, la, ec)
        for ec, la, eh, ww, wf, ff, dbf, dff in itertools.product(
            (0.0, 1.0),
            (0.0, 1.0),
            (1.0, 0.0, 2.0),
            waits,
            firsts,
            (False, True),
            (False, True),
            (True, False),
        )
    ]
    critical = [
        Policy(critical_path=True, period=period, weight_wait=ww, entry_headroom=eh)
        for eh, ww, period in itertools.product((1.0, 2.0), waits, (0.0, 0.1, 0.25, 0.5, 1.0))
    ]
    seen: set[Policy] = set()
    ordered = []
    for policy in core + grid + critical:
        if policy not in seen:
            seen.add(policy)
            ordered.append(policy)
    return ordered


def evaluation_budget(time_budget_s: float, num_ops: int) -> int:
    """How many list-schedule constructions (and jittered variants) the search may run.

    ``time_budget_s / (_SECONDS_PER_OP * ops)``, at least :data:`_MIN_CONSTRUCT`: small problems
    get the whole policy list and a local search, large ones the best few policies. The torch
    seeds are replayed on top of this budget, so planning time grows about linearly with the op
    count once the floor is reached (docs/scheduler.md has the measured times).
    """
    return max(_MIN_CONSTRUCT, int(time_budget_s / (_SECONDS_PER_OP * num_ops)))


def plan(
    costs: CostModel,
    placement: Placement,
    num_microbatches: int,
    *,
    memory_limit: float | None = None,
    time_budget_s: float = 0.2,
    split_backward: bool = True,
) -> Plan:
    """Plan the orders of one frame of ``num_microbatches`` micro-batches.

    ``memory_limit`` is the per-rank activation budget in ``costs.activation`` units (default:
    1F1B's peak, :func:`default_memory_limit`). ``time_budget_s`` sizes the search (see the
    module docstring: deterministic, not clock-driven). ``split_backward=False`` plans with fused
    B ops only (for stages that cannot split the backward).

    The result is never worse (in this cost model) than any torch schedule on the same placement
    whose orders fit ``memory_limit``: those orders are candidates too (:mod:`.seeds`).
    """
    costs.check_placement(placement)
    if num_microbatches < 1:
        raise ScheduleError(f"num_microbatches = {num_microbatches}: must be >= 1")
    if time_budget_s <= 0:
        raise ScheduleError(f"time_budget_s = {time_budget_s}: must be > 0")
    floor = minimum_memory_limit(costs, placement)
    limit = default_memory_limit(costs, placement, num_microbatches) if memory_limit is None else memory_limit
    if limit < floor - 1e-9:
        raise ScheduleError(
            f"memory_limit = {limit}: too small; this placement needs at least {floor} "
            f"(one micro-batch alive on every stage of the busiest rank)"
        )
    problem = Problem(costs, placement, num_microbatches, split_backward=split_backward, memory_limit=limit)
    bound = lb_tight(costs, placement, num_microbatches)
    search = _Search(problem, costs)
    search.add_seeds()
    if search.best is not None and search.best.makespan <= bound + 1e-9:
        return search.plan(bound)  # a seed already meets the lower bound: nothing to search for
    budget = evaluation_budget(time_budget_s, len(problem.kinds) * problem.num_stages * problem.m)
    candidates = _candidate_policies(split_backward)
    # Half the budget for constructions, the rest for jittered variants and local search.
    construct = min(len(candidates), max(1, budget // 2))
    ranked: list[tuple[float, int, Policy]] = []
    for index, policy in enumerate(candidates):
        if index >= construct and search.best is not None:
            break  # past the budget; keep going only while nothing fits the memory budget yet
        result = list_schedule(problem, policy)
        if result is not None:
            ranked.append((result.makespan, index, policy))
            search.add_list_schedule(result, policy)
            if search.best is not None and search.best.makespan <= bound + 1e-9:
                return search.plan(bound)
    spent = construct
    ranked.sort(key=lambda item: (item[0], item[1]))
    jitter_rounds = max(0, (budget - spent) // 2)
    for seed, (_, _, base) in itertools.islice(
        itertools.product(range(1, _JITTER_SEEDS + 1), ranked[:3]), jitter_rounds
    ):
        policy = dataclasses.replace(base, jitter=0.75, seed=seed)
        result = list_schedule(problem, policy)
        spent += 1
        if result is not None:
            search.add_list_schedule(result, policy)
    best = search.best
    if best is None:
        raise ScheduleError(
            f"memory_limit = {limit}: no candidate order fits; raise the limit (1F1B needs "
            f"{default_memory_limit(costs, placement, num_microbatches)})"
        )
    if budget > spent:
        steps = min(_MAX_IMPROVE_STEPS, int((budget - spent) * _SECONDS_PER_OP / _SECONDS_PER_REPLAY_OP))
        if steps > 0:
            improved, _ = improve(problem, best.ops, steps, seed=0)
            search.add_ops(improved, best.policy, best.source + " + local search")
            best = search.best
            assert best is not None
    return search.plan(bound)


@dataclass(frozen=True)
class _Candidate:
    makespan: float
    """Replayed makespan including the DP all-reduces (what :func:`simulate` reports)."""
    ops: list[list[int]]
    policy: Policy | None
    source: str


class _Search:
    """The best candidate so far; every candidate is scored as :func:`simulate` would score it."""

    def __init__(self, problem: Problem, costs: CostModel) -> None:
        self.problem = problem
        self.costs = costs
        self.best: _Candidate | None = None
        self._preds: list[tuple[int, ...]] | None = None

    def plan(self, lower_bound: float) -> Plan:
        best, pr = self.best, self.problem
        assert best is not None
        orders: Orders = {r: pr.actions(rank_ops) for r, rank_ops in enumerate(best.ops)}
        return Plan(
            orders=orders,
            placement=pr.placement,
            num_microbatches=pr.m,
            predicted_makespan=best.makespan,
            lower_bound=lower_bound,
            memory_limit=pr.memory_limit,
            policy=best.policy,
            source=best.source,
        )

    def _offer(self, candidate: _Candidate) -> None:
        if self.best is None or candidate.makespan < self.best.makespan - 1e-9:
            self.best = candidate

    def add_seeds(self) -> None:
        """Torch's schedules on this placement that fit the memory limit."""
        pr = self.problem
        limit = pr.memory_limit + 1e-9
        for name, orders in seed_orders(pr.placement, pr.m):
            ops = seed_ops(pr, orders)
            if ops is not None and all(memory_ok(pr, rank_ops, limit) for rank_ops in ops):
                self.add_ops(ops, None, f"torch {name}")

    def add_list_schedule(self, result: Schedule, policy: Policy) -> None:
        if result.asap:
            finish, _ = allreduce_finish(
                result.rank_end, dict(enumerate(result.last_grad)), self.costs, self.problem.placement
            )
            self._offer(_Candidate(max(finish), result.orders, policy, "list schedule"))
        elif self.best is None or result.makespan < self.best.makespan - 1e-9:
            # A wait rule fired: the ASAP replay of these orders is no later than the list times.
            self.add_ops(result.orders, policy, "list schedule")

    def add_ops(self, ops: list[list[int]], policy: Policy | None, source: str) -> None:
        pr = self.problem
        if self._preds is None:
            self._preds = predecessors_of(pr)
        timing = replay(pr, ops, self._preds)
        if timing is None:
            return
        block = pr.num_stages * pr.m
        grad_kind = 2 if pr.split else 1
        last_grad = {
            s: max(timing.ends[grad_kind * block + s * pr.m + mb] for mb in range(pr.m))
            for s in range(pr.num_stages)
        }
        finish, _ = allreduce_finish(timing.finish, last_grad, self.costs, pr.placement)
        self._offer(_Candidate(max(finish), ops, policy, source))
