"""The cost model a run really pays: measured op costs plus the executor's own costs.

The planner's cost model knows per-stage op costs, the p2p hand-off latency and the data-parallel
all-reduce. A real frame also pays for things no schedule can hide, and these are measured from
the op records of all ranks (:class:`~hyperframe_runtime.pipeline.metrics.RankFrame`):

- ``op_overhead_s``: the executor's cost per op (lowering, issuing sends and receives, Python
  bookkeeping). It is the median gap before ops whose inputs were all produced on the same rank,
  so the gap cannot be a wait for a neighbour.
- ``p2p_s``: the hand-off latency (see :func:`~hyperframe_runtime.pipeline.planning.estimate_p2p`).
- ``allreduce_s``: per stage, the median seconds from its REDUCE_GRAD point until its
  asynchronous all-reduce was seen complete.
- ``frame_overhead_s``: per frame, what is outside the pipeline program and the exposed DP wait
  (zeroing gradients, the optimizer step, the batch), the slowest rank's median.
- ``activation``: per stage, the bytes one micro-batch holds from its F until its backward, as
  the executor measured them (``RankFrame.activation_bytes``): the planner's memory budget is then
  in bytes (``pipeline.memory``). Left empty (one unit per stage) unless every stage was measured.
- ``executor_s``: per frame, what the pipeline program took beyond the simulator's replay of the
  orders that actually ran on the costs above (start-up of the program, receives that were not
  yet posted, contention between ranks sharing cores): the median over the measured frames.

The predicted frame time of a plan is the simulator's makespan of its order on the measured
costs, each op made ``op_overhead_s`` longer, plus ``executor_s`` and ``frame_overhead_s``.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hyperframe_runtime.pipeline.metrics import RankFrame
from hyperframe_runtime.pipeline.planning import costs_from_samples, estimate_p2p
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Action, OpKind, Orders, Placement
from hyperframe_runtime.schedule.simulate import simulate
from hyperframe_runtime.schedule.validate import backward_kinds, predecessors

__all__ = ["Calibration", "calibrate", "planning_costs", "predict_frame_s"]


@dataclass(frozen=True, slots=True)
class Calibration:
    """What a frame costs besides its ops, and the measured op costs (see the module docstring)."""

    costs: CostModel
    """Per-stage median F, I, W seconds (B split in halves), with ``p2p``, ``allreduce`` and
    ``activation`` (bytes per micro-batch) set."""
    op_overhead_s: float
    frame_overhead_s: float
    frames: int
    """How many measured frames (per replica) this calibration is made from."""
    split_measured: bool = False
    """Whether I and W ran as separate ops (else ``costs`` halves measured fused B ops)."""
    executor_s: float = 0.0


def _local_gaps(window: Sequence[RankFrame], placement: Placement) -> list[float]:
    gaps: list[float] = []
    for rf in window:
        ran = [Action(stage, OpKind(kind), mb) for stage, kind, mb, _, _, _ in rf.records]
        grad_kind = backward_kinds({0: ran})
        for action, (_, _, _, _, _, wait) in zip(ran, rf.records, strict=True):
            deps = predecessors(action, placement.num_stages, grad_kind)
            if all(placement.rank_of(d.stage) == placement.rank_of(action.stage) for d in deps):
                gaps.append(wait)
    return gaps


def _allreduce(window: Sequence[RankFrame], num_stages: int) -> tuple[float, ...]:
    by_stage: dict[int, list[float]] = defaultdict(list)
    for rf in window:
        for stage, start, end in rf.reduces:
            by_stage[stage].append(max(0.0, end - start))
    if not by_stage:
        return ()
    return tuple(statistics.median(by_stage[s]) if by_stage[s] else 0.0 for s in range(num_stages))


def _activation(window: Sequence[RankFrame], num_stages: int) -> tuple[float, ...]:
    measured: dict[int, int] = {}
    for rf in window:
        for stage, size in rf.activation_bytes:
            measured[stage] = max(measured.get(stage, 0), size)
    if sorted(measured) != list(range(num_stages)):
        return ()  # not every stage measured: keep unit activations rather than mix units
    return tuple(float(measured[s]) for s in range(num_stages))


def calibrate(window: Sequence[RankFrame], placement: Placement) -> Calibration:
    """A calibration from every rank's measurements of the frames in ``window`` (one placement)."""
    samples = [(stage, kind, end - start) for rf in window for stage, kind, _, start, end, _ in rf.records]
    costs = costs_from_samples(samples, placement)
    costs = replace(
        costs,
        p2p=estimate_p2p(window, placement),
        allreduce=_allreduce(window, placement.num_stages),
        activation=_activation(window, placement.num_stages),
    )
    gaps = _local_gaps(window, placement)
    per_rank: dict[int, list[float]] = defaultdict(list)
    for rf in window:
        per_rank[rf.rank].append(max(0.0, rf.frame_s - rf.pipeline_s - rf.dp_wait_s))
    partial = Calibration(
        costs=costs,
        op_overhead_s=statistics.median(gaps) if gaps else 0.0,
        frame_overhead_s=max((statistics.median(v) for v in per_rank.values()), default=0.0),
        frames=len({(rf.frame, rf.dp_rank) for rf in window}),
        split_measured=any(kind == OpKind.W.value for _, kind, _ in samples),
    )
    return replace(partial, executor_s=_executor_residual(window, placement, partial))


def _executor_residual(window: Sequence[RankFrame], placement: Placement, partial: Calibration) -> float:
    """Median over frames of (measured pipeline program + DP wait) - replay of what ran."""
    frames: dict[tuple[int, int], list[RankFrame]] = defaultdict(list)
    for rf in window:
        frames[(rf.frame, rf.dp_rank)].append(rf)
    residuals: list[float] = []
    for ranks in frames.values():
        if len(ranks) != placement.num_ranks:
            continue
        orders: Orders = {
            rf.pp_rank: [Action(stage, OpKind(kind), mb) for stage, kind, mb, _, _, _ in rf.records]
            for rf in ranks
        }
        m = sum(1 for a in orders.get(placement.rank_of(0), []) if a.stage == 0 and a.kind is OpKind.F)
        split = any(a.kind is OpKind.W for acts in orders.values() for a in acts)
        try:
            sim = simulate(orders, placement, planning_costs(partial, split_backward=split), m)
        except ValueError:  # records that are not a whole frame (never expected)
            continue
        measured = max(rf.pipeline_s + rf.dp_wait_s for rf in ranks)
        residuals.append(measured - sim.makespan)
    return statistics.median(residuals) if residuals else 0.0


def planning_costs(calibration: Calibration, *, split_backward: bool, num_stages: int = 0) -> CostModel:
    """The calibrated costs (restaged to ``num_stages`` when given) with the executor's per-op
    cost folded into each op. A fused B is one op but costs ``I + W`` in the model, so each half
    gets half the overhead.
    """
    o = calibration.op_overhead_s
    share = o if split_backward else o / 2
    c = restage(calibration.costs, num_stages or calibration.costs.num_stages)
    return replace(
        c,
        forward=tuple(x + o for x in c.forward),
        backward_input=tuple(x + share for x in c.backward_input),
        backward_weight=tuple(x + share for x in c.backward_weight),
    )


def predict_frame_s(
    orders: Orders, placement: Placement, calibration: Calibration, num_microbatches: int
) -> float:
    """Predicted wall time of one frame of ``orders`` (see the module docstring)."""
    split = any(a.kind is OpKind.W for actions in orders.values() for a in actions)
    costs = planning_costs(calibration, split_backward=split, num_stages=placement.num_stages)
    sim = simulate(orders, placement, costs, num_microbatches)
    return sim.makespan + calibration.executor_s + calibration.frame_overhead_s


def restage(costs: CostModel, num_stages: int) -> CostModel:
    """The costs of the same layers cut into ``num_stages`` stages.

    Coarser (``num_stages`` divides the measured count): adjacent stages summed. Finer (the
    measured count divides ``num_stages``): each stage's cost shared evenly by its parts, an
    estimate (the layers of a stage are taken as equal) used only to predict, never to plan.
    """
    n = costs.num_stages
    if num_stages == n:
        return costs
    if n % num_stages == 0:
        k = n // num_stages

        def merged(values: tuple[float, ...]) -> tuple[float, ...]:
            return tuple(sum(values[i : i + k]) for i in range(0, n, k)) if values else ()

        change = merged
    elif num_stages % n == 0:
        k = num_stages // n

        def split(values: tuple[float, ...]) -> tuple[float, ...]:
            return tuple(v / k for v in values for _ in range(k)) if values else ()

        change = split
    else:
        raise ValueError(f"cannot restage {n} measured stages into {num_stages}")
    return replace(
        costs,
        forward=change(costs.forward),
        backward_input=change(costs.backward_input),
        backward_weight=change(costs.backward_weight),
        allreduce=change(costs.allreduce),
        activation=change(costs.activation),
    )
