"""From a training config and measured costs to the per-rank order of the next frames.

- ``hyperframe``: the cost-model planner (``schedule.planner.plan``). The first frame uses unit
  costs. With ``replan_every`` > 0 the frame loop then measures the candidate schedules and
  re-plans from measured costs (``pipeline.selection``, ``pipeline.candidates``); with 0 the
  unit-cost plan runs throughout.
- ``gpipe``, ``1f1b``, ``interleaved1f1b``, ``zbv``: torch's own schedule orders
  (``schedule.baselines``; 1F1B is the textbook order, see there), never re-planned.

All policies then run through the same executor.
"""

from __future__ import annotations

import hashlib
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.pipeline.memory import checked_budget
from hyperframe_runtime.pipeline.metrics import RankFrame
from hyperframe_runtime.schedule.baselines import baseline, baseline_placement
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Action, OpKind, Orders, Placement
from hyperframe_runtime.schedule.planner import plan as plan_orders

__all__ = [
    "BASELINE_OF_POLICY",
    "FramePlan",
    "costs_from_samples",
    "estimate_p2p",
    "initial_plan",
    "orders_digest",
    "placement_for",
    "plan_from_costs",
]

BASELINE_OF_POLICY: Final[dict[str, str]] = {
    "gpipe": "GPipe",
    "1f1b": "1F1B",
    "interleaved1f1b": "Interleaved1F1B",
    "zbv": "ZBVZeroBubble",
}
"""Config policy -> the torch schedule (``schedule.baselines`` name) whose orders it runs."""


@dataclass(frozen=True)
class FramePlan:
    """The in-frame order table the executor runs, and where it came from."""

    policy: str
    placement: Placement
    orders: Orders
    num_microbatches: int
    predicted_makespan: float = 0.0
    """Planner's replay of ``orders`` on ``costs`` (hyperframe only; 0 otherwise)."""
    costs: CostModel | None = None
    """The costs this plan was made from (hyperframe only)."""
    replans: int = 0
    """How many times the order was re-planned from measured costs before this plan."""
    split_backward: bool = True
    """Whether the order splits backwards into I and W (else fused B ops)."""
    schedule: str = ""
    """Which candidate schedule this is (``pipeline.candidates``: ``1f1b``, ``hyperframe-v``, ...);
    "" for the plan a policy starts with."""

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "stage_to_rank": list(self.placement.stage_to_rank),
            "num_microbatches": self.num_microbatches,
            "orders": {str(rank): [str(a) for a in actions] for rank, actions in sorted(self.orders.items())},
            "predicted_makespan": self.predicted_makespan,
            "costs": self.costs.to_mapping() if self.costs is not None else None,
            "replans": self.replans,
            "split_backward": self.split_backward,
            "schedule": self.schedule,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FramePlan:
        costs = data.get("costs")
        return cls(
            policy=str(data["policy"]),
            placement=Placement(tuple(int(r) for r in data["stage_to_rank"])),
            orders={int(rank): [Action.parse(a) for a in acts] for rank, acts in data["orders"].items()},
            num_microbatches=int(data["num_microbatches"]),
            predicted_makespan=float(data.get("predicted_makespan", 0.0)),
            costs=CostModel.from_mapping(costs) if costs else None,
            replans=int(data.get("replans", 0)),
            split_backward=bool(data.get("split_backward", True)),
            schedule=str(data.get("schedule", "")),
        )


def placement_for(config: TrainConfig) -> Placement:
    """Which rank holds which stage under ``config``'s policy and stages per rank."""
    if config.policy in BASELINE_OF_POLICY:
        return baseline_placement(BASELINE_OF_POLICY[config.policy], config.pipeline)
    if config.effective_stages_per_rank == 1:
        return Placement.one_per_rank(config.pipeline)
    return Placement.vshape(config.pipeline)


def plan_from_costs(
    config: TrainConfig,
    placement: Placement,
    costs: CostModel,
    *,
    replans: int = 0,
    split_backward: bool = True,
) -> FramePlan:
    """The hyperframe planner's order for ``costs`` (fused B ops when ``split_backward`` is off)."""
    result = plan_orders(
        costs,
        placement,
        config.microbatches_per_frame,
        memory_limit=checked_budget(config, costs, placement),
        time_budget_s=config.planner_time_budget_s or 0.2,
        split_backward=split_backward,
    )
    return FramePlan(
        policy=config.policy,
        placement=placement,
        orders=result.orders,
        num_microbatches=config.microbatches_per_frame,
        predicted_makespan=result.predicted_makespan,
        costs=costs,
        replans=replans,
        split_backward=split_backward,
    )


def initial_plan(config: TrainConfig) -> FramePlan:
    """The order of the first frame: torch's for a baseline policy, unit costs for hyperframe."""
    m = config.microbatches_per_frame
    if config.policy in BASELINE_OF_POLICY:
        chosen = baseline(BASELINE_OF_POLICY[config.policy], config.pipeline, m)
        return FramePlan(config.policy, chosen.placement, chosen.orders, m)
    placement = placement_for(config)
    return plan_from_costs(config, placement, CostModel.uniform(placement.num_stages))


_MIN_COST: Final = 1e-6


def costs_from_samples(samples: Iterable[tuple[int, str, float]], placement: Placement) -> CostModel:
    """Per-stage median F, I and W seconds from ``(stage, kind, seconds)`` samples of all ranks.

    A fused B (from a policy without split backward) counts as half I and half W. A stage with
    no samples of a kind gets the median of the other stages (never expected in practice).
    """
    by_key: dict[tuple[int, str], list[float]] = defaultdict(list)
    for stage, kind, seconds in samples:
        if kind == OpKind.B.value:
            by_key[(stage, OpKind.I.value)].append(seconds / 2)
            by_key[(stage, OpKind.W.value)].append(seconds / 2)
        else:
            by_key[(stage, kind)].append(seconds)

    def column(kind: OpKind) -> tuple[float, ...]:
        medians = {
            s: statistics.median(by_key[(s, kind.value)])
            for s in range(placement.num_stages)
            if by_key[(s, kind.value)]
        }
        fallback = statistics.median(medians.values()) if medians else 1.0
        return tuple(max(_MIN_COST, medians.get(s, fallback)) for s in range(placement.num_stages))

    return CostModel(
        forward=column(OpKind.F), backward_input=column(OpKind.I), backward_weight=column(OpKind.W)
    )


def estimate_p2p(window: Sequence[RankFrame], placement: Placement) -> float:
    """Median latency of cross-rank activation/gradient hand-offs measured in ``window``.

    For an op whose input comes from another rank (F from stage s - 1, I/B from stage s + 1),
    the latency is ``start - producer end`` on the ranks' wall clocks, counted only when the
    consumer was already idle when the producer finished (so it started as soon as the data
    arrived). Across hosts the clocks' skew adds noise; negative values are dropped.
    """
    last = placement.num_stages - 1
    delays: list[float] = []
    groups: dict[tuple[int, int], list[RankFrame]] = defaultdict(list)
    for rank_frame in window:
        groups[(rank_frame.frame, rank_frame.dp_rank)].append(rank_frame)
    backward = (OpKind.I.value, OpKind.B.value)
    for ranks in groups.values():
        ends: dict[tuple[int, str, int], float] = {}
        for rf in ranks:
            for stage, kind, mb, _, end, _ in rf.records:
                ends[(stage, OpKind.I.value if kind in backward else kind, mb)] = rf.wall_start + end
        for rf in ranks:
            for stage, kind, mb, start, _, wait in rf.records:
                if kind == OpKind.F.value and stage > 0:
                    source = (stage - 1, OpKind.F.value, mb)
                elif kind in backward and stage < last:
                    source = (stage + 1, OpKind.I.value, mb)
                else:
                    continue
                if placement.rank_of(source[0]) == placement.rank_of(stage) or source not in ends:
                    continue
                began, idle_from = rf.wall_start + start, rf.wall_start + start - wait
                if wait > 0 and idle_from <= ends[source] <= began:
                    delays.append(began - ends[source])
    return statistics.median(delays) if delays else 0.0


def orders_digest(orders: Orders) -> str:
    """A short hash of an order table (to check that every rank planned the same)."""
    text = "|".join(f"{rank}:{','.join(str(a) for a in orders[rank])}" for rank in sorted(orders))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
