"""Activation memory in bytes: the planner's per-rank budget and the peaks a plan is predicted to reach.

Units. ``costs.activation`` holds each stage's bytes per micro-batch once the calibration has
them (the executor measures them, ``pipeline.activation_probe``); before that (the unit-cost
plans of the first frames) it is empty, one unit per stage. A rank's activation memory is the sum
over the micro-batches in flight on its stages (``schedule.simulate.memory_peaks``).

The budget (:func:`memory_budget`) is what the planner and the torch-schedule filter use:

- ``memory_limit_bytes`` > 0: that many bytes per rank. On unit costs (nothing measured yet) it
  cannot be applied, so those plans keep the default below, in units.
- ``memory_limit`` > 0: that many micro-batch activations of the placement's heaviest stage, so
  ``memory_limit * max(costs.activation)``: in bytes once measured, in units before (the meaning
  this field always had; for equal stages both agree).
- neither: ``None``, the planner's default, 1F1B's peak on the same costs
  (``schedule.planner.default_memory_limit``): in bytes once measured.

:class:`PlanPeaks` gives the running plan's predicted peak per rank next to 1F1B's on the same
calibrated costs, for the per-frame metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Orders, Placement
from hyperframe_runtime.schedule.planner import minimum_memory_limit, one_f_one_b_peaks
from hyperframe_runtime.schedule.simulate import memory_peaks

if TYPE_CHECKING:  # calibration imports planning, which imports this module
    from hyperframe_runtime.pipeline.calibration import Calibration

__all__ = [
    "ActivationPeaks",
    "PlanPeaks",
    "activation_peaks",
    "checked_budget",
    "fits_budget",
    "in_bytes",
    "memory_budget",
]


def in_bytes(costs: CostModel) -> bool:
    """Whether ``costs.activation`` holds measured bytes (else one unit per stage)."""
    return bool(costs.activation)


def memory_budget(config: TrainConfig, costs: CostModel) -> float | None:
    """The per-rank activation budget for planning on ``costs`` (see the module docstring);
    None is the planner's default, 1F1B's peak on ``costs``."""
    if config.memory_limit_bytes:
        return float(config.memory_limit_bytes) if in_bytes(costs) else None
    if config.memory_limit:
        return config.memory_limit * max(costs.activation_of(s) for s in range(costs.num_stages))
    return None


def checked_budget(config: TrainConfig, costs: CostModel, placement: Placement) -> float | None:
    """:func:`memory_budget`, or a ValueError naming the field and the fix when it is below what
    ``placement`` needs at all (one micro-batch in flight on every stage of a rank)."""
    budget = memory_budget(config, costs)
    floor = minimum_memory_limit(costs, placement)
    if budget is None or budget >= floor * (1 - 1e-9):
        return budget
    per_rank = placement.num_stages // placement.num_ranks
    if config.memory_limit_bytes:
        raise ValueError(
            f"memory_limit_bytes: {config.memory_limit_bytes} bytes per rank is below the "
            f"{floor:.0f} bytes (measured) that {per_rank} stage(s) per rank need with one "
            f"micro-batch in flight on each; raise it to at least {floor:.0f}"
            + (" or set stages_per_rank to 1" if per_rank > 1 else "")
        )
    raise ValueError(
        f"memory_limit: {config.memory_limit} heaviest-stage activations per rank are below the "
        f"{floor / max(costs.activation_of(s) for s in range(costs.num_stages)):.2f} that {per_rank} "
        "stage(s) per rank need with one micro-batch in flight on each; raise it"
        + (" or set stages_per_rank to 1" if per_rank > 1 else "")
    )


def fits_budget(
    config: TrainConfig, orders: Orders, placement: Placement, costs: CostModel, num_microbatches: int
) -> bool:
    """Whether ``orders`` stay within :func:`memory_budget` on ``costs`` on every rank."""
    budget = memory_budget(config, costs)
    if budget is None:  # the default: 1F1B's peak
        budget = max(one_f_one_b_peaks(costs, placement, num_microbatches))
    return max(memory_peaks(orders, placement, costs)[1]) <= budget * (1 + 1e-9)


@dataclass(frozen=True, slots=True)
class ActivationPeaks:
    """Predicted activation peak of each rank for a plan and for 1F1B, on the same costs."""

    plan: tuple[float, ...] = ()
    one_f_one_b: tuple[float, ...] = ()
    in_bytes: bool = False
    """Whether the peaks are bytes (measured activations) or units of one stage's activation."""

    @property
    def plan_max(self) -> float:
        return max(self.plan, default=0.0)

    @property
    def one_f_one_b_max(self) -> float:
        return max(self.one_f_one_b, default=0.0)


def activation_peaks(
    orders: Orders, placement: Placement, costs: CostModel, num_microbatches: int
) -> ActivationPeaks:
    """``orders``' peak per rank (``memory_peaks``) and 1F1B's (the default budget) on ``costs``."""
    return ActivationPeaks(
        plan=memory_peaks(orders, placement, costs)[1],
        one_f_one_b=one_f_one_b_peaks(costs, placement, num_microbatches),
        in_bytes=in_bytes(costs),
    )


class _Plan(Protocol):
    @property
    def orders(self) -> Orders: ...
    @property
    def placement(self) -> Placement: ...
    @property
    def num_microbatches(self) -> int: ...


class PlanPeaks:
    """The running plan's :class:`ActivationPeaks` on the calibrated costs of its own placement,
    in bytes; empty until those costs carry measured bytes. Recomputed only when the plan or the
    calibration changes."""

    def __init__(self) -> None:
        self._key: tuple[int, int] = (0, 0)
        self._peaks = ActivationPeaks()

    def of(self, plan: _Plan, calibration: Calibration | None) -> ActivationPeaks:
        if calibration is None or not in_bytes(calibration.costs):
            return ActivationPeaks()
        key = (id(plan), id(calibration))
        if key != self._key:
            self._key = key
            self._peaks = activation_peaks(
                plan.orders, plan.placement, calibration.costs, plan.num_microbatches
            )
        return self._peaks
