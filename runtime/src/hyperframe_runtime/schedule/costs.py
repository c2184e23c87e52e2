"""The cost model a schedule is planned and replayed against.

Costs are in any consistent time unit (the bench uses "one forward of an even stage" = 1.0; the
executor uses measured seconds). A backward ``B`` costs ``I + W`` of the same stage.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hyperframe_runtime.schedule.ir import OpKind, Placement, ScheduleError

__all__ = ["CostModel"]


@dataclass(frozen=True, kw_only=True)
class CostModel:
    """Per-stage op costs, per-rank speed, comm costs and activation memory of one pipeline."""

    forward: tuple[float, ...]
    """F cost of each stage on a reference-speed device (one micro-batch)."""
    backward_input: tuple[float, ...]
    """I cost (gradient w.r.t. the stage input) of each stage."""
    backward_weight: tuple[float, ...]
    """W cost (gradient w.r.t. the stage weights) of each stage. B = I + W."""
    rank_slowdown: tuple[float, ...] = ()
    """Time multiplier of each rank's device: 1.5 means that device takes 1.5x as long.
    Empty means every rank runs at 1.0."""
    p2p: float = 0.0
    """Latency of one activation or gradient transfer between stages on different ranks.
    Transfers between two stages of the same rank are free. Transfers overlap with compute."""
    allreduce: tuple[float, ...] = ()
    """Data-parallel gradient all-reduce time of each stage, started after the stage's last W (or B)
    and overlapped with compute on a per-rank comm stream. Empty means no data parallelism."""
    activation: tuple[float, ...] = ()
    """Activation memory units held by one in-flight micro-batch of each stage (from its F until
    its W or B). Empty means 1.0 per stage."""

    def __post_init__(self) -> None:
        n = len(self.forward)
        if n == 0:
            raise ScheduleError("costs.forward: empty; give one F cost per pipeline stage")
        for name in ("backward_input", "backward_weight"):
            values = getattr(self, name)
            if len(values) != n:
                raise ScheduleError(
                    f"costs.{name}: has {len(values)} entries but costs.forward has {n}; "
                    f"give one value per stage"
                )
        for name in ("allreduce", "activation"):
            values = getattr(self, name)
            if values and len(values) != n:
                raise ScheduleError(
                    f"costs.{name}: has {len(values)} entries but there are {n} stages; "
                    f"give one value per stage or leave it empty"
                )
        for name in ("forward", "backward_input", "backward_weight", "allreduce", "activation"):
            for i, value in enumerate(getattr(self, name)):
                if not (math.isfinite(value) and value >= 0):
                    raise ScheduleError(f"costs.{name}[{i}] = {value}: must be a finite number >= 0")
        for i, value in enumerate(self.rank_slowdown):
            if not (math.isfinite(value) and value > 0):
                raise ScheduleError(f"costs.rank_slowdown[{i}] = {value}: must be a finite number > 0")
        if not (math.isfinite(self.p2p) and self.p2p >= 0):
            raise ScheduleError(f"costs.p2p = {self.p2p}: must be a finite number >= 0")

    @property
    def num_stages(self) -> int:
        return len(self.forward)

    def slowdown(self, rank: int) -> float:
        return self.rank_slowdown[rank] if self.rank_slowdown else 1.0

    def base_cost(self, stage: int, kind: OpKind) -> float:
        """Cost of one op on a reference-speed device; comm kinds cost nothing on the compute stream."""
        if kind is OpKind.F:
            return self.forward[stage]
        if kind is OpKind.I:
            return self.backward_input[stage]
        if kind is OpKind.W:
            return self.backward_weight[stage]
        if kind is OpKind.B:
            return self.backward_input[stage] + self.backward_weight[stage]
        return 0.0

    def op_cost(self, stage: int, kind: OpKind, rank: int) -> float:
        """Cost of one op of ``stage`` when it runs on ``rank``."""
        return self.base_cost(stage, kind) * self.slowdown(rank)

    def activation_of(self, stage: int) -> float:
        return self.activation[stage] if self.activation else 1.0

    def allreduce_of(self, stage: int) -> float:
        return self.allreduce[stage] if self.allreduce else 0.0

    def check_placement(self, placement: Placement) -> None:
        """Raise a ScheduleError naming the field when costs and placement disagree."""
        if placement.num_stages != self.num_stages:
            raise ScheduleError(
                f"costs.forward has {self.num_stages} stages but the placement has "
                f"{placement.num_stages}; give one cost per stage of the placement"
            )
        if self.rank_slowdown and len(self.rank_slowdown) != placement.num_ranks:
            raise ScheduleError(
                f"costs.rank_slowdown has {len(self.rank_slowdown)} entries but the placement has "
                f"{placement.num_ranks} ranks; give one per rank or leave it empty"
            )

    @classmethod
    def uniform(
        cls,
        num_stages: int,
        *,
        f: float = 1.0,
        i: float = 1.0,
        w: float = 1.0,
        p2p: float = 0.0,
        rank_slowdown: Sequence[float] = (),
    ) -> CostModel:
        """Every stage costs the same: F = f, I = i, W = w."""
        return cls(
            forward=(f,) * num_stages,
            backward_input=(i,) * num_stages,
            backward_weight=(w,) * num_stages,
            p2p=p2p,
            rank_slowdown=tuple(rank_slowdown),
        )

    def to_mapping(self) -> dict[str, Any]:
        """Plain data (YAML/JSON-able) form, read back by :meth:`from_mapping`."""
        data: dict[str, Any] = {
            "forward": list(self.forward),
            "backward_input": list(self.backward_input),
            "backward_weight": list(self.backward_weight),
            "p2p": self.p2p,
        }
        for name in ("rank_slowdown", "allreduce", "activation"):
            values = getattr(self, name)
            if values:
                data[name] = list(values)
        return data

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> CostModel:
        """Build from a cost file's mapping. Per-stage keys other than ``forward`` may be one number,
        which is used for every stage."""
        known = {
            "forward",
            "backward_input",
            "backward_weight",
            "rank_slowdown",
            "p2p",
            "allreduce",
            "activation",
        }
        unknown = sorted(set(data) - known)
        if unknown:
            raise ScheduleError(f"costs: unknown keys {unknown}; known keys are {sorted(known)}")
        if "forward" not in data:
            raise ScheduleError("costs.forward: missing; give a list with one F cost per stage")
        forward = _floats("forward", data["forward"], None)
        n = len(forward)
        return cls(
            forward=forward,
            backward_input=_floats("backward_input", data.get("backward_input", forward), n),
            backward_weight=_floats("backward_weight", data.get("backward_weight", forward), n),
            rank_slowdown=_floats("rank_slowdown", data.get("rank_slowdown", []), None),
            p2p=_float("p2p", data.get("p2p", 0.0)),
            allreduce=_floats("allreduce", data.get("allreduce", []), n),
            activation=_floats("activation", data.get("activation", []), n),
        )


def _float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScheduleError(f"costs.{name} = {value!r}: must be a number")
    return float(value)


def _floats(name: str, value: Any, broadcast_to: int | None) -> tuple[float, ...]:
    if isinstance(value, int | float) and not isinstance(value, bool) and broadcast_to is not None:
        return (float(value),) * broadcast_to
    if not isinstance(value, list | tuple):
        raise ScheduleError(f"costs.{name} = {value!r}: must be a list of numbers")
    return tuple(_float(f"{name}[{i}]", v) for i, v in enumerate(value))
