"""The single home of private ``torch.distributed.pipelining`` names.

Every private torch name (``_Action``, ``_ComputationType``, ``_PipelineScheduleRuntime``,
``pipeline_order`` internals, the per-chunk methods of ``PipelineStage`` that the timed stage
overrides, ...) used anywhere in HyperFrame is reached through this module, so a torch upgrade
touches one file. The torch versions these private names were read from and are tested with are
:data:`TESTED_TORCH` (2.13.x, pinned in requirements-dev.txt; runtime/pyproject.toml allows the
same range, and ``tests/runtime/pipeline/test_torch_pin.py`` keeps the two equal).
``tests/runtime/pipeline/test_torch_adapter.py`` fails loudly on any other version, and the
executor logs a warning when it runs on one.
"""

from __future__ import annotations

import functools
import logging
import time
import types
from collections.abc import Callable, Sequence
from typing import Any, Final

from hyperframe_runtime.schedule.ir import Action, OpKind, Orders, ScheduleError

__all__ = [
    "TESTED_TORCH",
    "TORCH_SCHEDULE_CLASSES",
    "OpRunner",
    "RuntimeSchedule",
    "check_torch_version",
    "from_torch_action",
    "is_tested_torch",
    "split_backward",
    "timed_stage",
    "to_torch_action",
    "to_torch_orders",
    "torch_schedule_orders",
]

# ---------------------------------------------------------------------------------------------
# Schedule baselines: torch's own schedule orders as HyperFrame Orders (owned by the schedule
# package, issue 8). Only pure order generation: no process group, no real stages.
# ---------------------------------------------------------------------------------------------

TORCH_SCHEDULE_CLASSES: dict[str, str] = {
    "GPipe": "ScheduleGPipe",
    "1F1B": "Schedule1F1B",
    "Interleaved1F1B": "ScheduleInterleaved1F1B",
    "LoopedBFS": "ScheduleLoopedBFS",
    "InterleavedZeroBubble": "ScheduleInterleavedZeroBubble",
    "ZBVZeroBubble": "ScheduleZBVZeroBubble",
    "DualPipeV": "ScheduleDualPipeV",
}
"""Baseline name -> class in ``torch.distributed.pipelining.schedules``."""

_SINGLE_STAGE = frozenset({"GPipe", "1F1B"})
_V_STYLE = frozenset({"ZBVZeroBubble", "DualPipeV"})

_KIND_BY_TORCH_VALUE = {
    "F": OpKind.F,
    "I": OpKind.I,
    "W": OpKind.W,
    "B": OpKind.B,
    "SEND_F": OpKind.SEND_F,
    "RECV_F": OpKind.RECV_F,
    "SEND_B": OpKind.SEND_B,
    "RECV_B": OpKind.RECV_B,
}


def from_torch_action(action: Any) -> list[Action]:
    """A torch ``_Action`` (or None) as HyperFrame actions.

    ``OVERLAP_F_B`` (DualPipeV) is flattened into its sub-actions in order; None (an explicit
    bubble) and bookkeeping actions (REDUCE_GRAD, UNSHARD, RESHARD) map to nothing.
    """
    if action is None:
        return []
    if action.sub_actions is not None:
        return [a for sub in action.sub_actions for a in from_torch_action(sub)]
    kind = _KIND_BY_TORCH_VALUE.get(action.computation_type.value)
    if kind is None or action.microbatch_index is None:
        return []
    return [Action(action.stage_index, kind, action.microbatch_index)]


def to_torch_action(action: Action) -> Any:
    """A HyperFrame Action as torch's ``_Action`` (for ``_PipelineScheduleRuntime`` orders)."""
    from torch.distributed.pipelining.schedules import _Action, _ComputationType

    return _Action(action.stage, _ComputationType(action.kind.value), action.microbatch)


def _dummy_stage(stage_index: int, num_stages: int, num_ranks: int, rank: int) -> Any:
    # The schedule constructors read only these attributes to build pipeline_order; submod=None
    # skips their torch.compile check. No process group is created.
    return types.SimpleNamespace(
        stage_index=stage_index,
        num_stages=num_stages,
        group_size=num_ranks,
        group_rank=rank,
        is_first=stage_index == 0,
        is_last=stage_index == num_stages - 1,
        submod=None,
    )


def _skip_lowering(self: Any, *args: Any, **kwargs: Any) -> None:
    return None


def torch_schedule_orders(name: str, num_ranks: int, num_microbatches: int) -> Orders:
    """Compute-only orders of torch's schedule ``name`` for ``num_ranks`` ranks.

    GPipe and 1F1B use one stage per rank; the others two stages per rank (looped placement,
    or V placement for ZBVZeroBubble and DualPipeV). Torch's own constraints apply (for example
    DualPipeV needs at least 2 * num_ranks micro-batches) and surface as ScheduleError.
    """
    if name not in TORCH_SCHEDULE_CLASSES:
        raise ScheduleError(
            f"unknown torch schedule {name!r}; known: {', '.join(sorted(TORCH_SCHEDULE_CLASSES))}"
        )
    from torch.distributed.pipelining import schedules

    # Only ``pipeline_order`` is read: skip the constructor's lowering to comm actions, which is
    # most of its time (seconds at p = 64, m = 256) and is redone by the executor anyway.
    base = getattr(schedules, TORCH_SCHEDULE_CLASSES[name])
    cls = type(base.__name__, (base,), {"_prepare_schedule_with_comms": _skip_lowering})
    p, m = num_ranks, num_microbatches
    try:
        if name in _SINGLE_STAGE:
            schedule = cls(_dummy_stage(0, p, p, 0), m)
        else:
            local = [0, 2 * p - 1] if name in _V_STYLE else [0, p]
            schedule = cls([_dummy_stage(s, 2 * p, p, 0) for s in local], m)
    except (ValueError, RuntimeError, AssertionError) as exc:
        raise ScheduleError(f"torch {name} cannot schedule p={p}, m={m}: {exc}") from exc
    order = schedule.pipeline_order
    return {rank: [a for t in order[rank] for a in from_torch_action(t)] for rank in range(p)}


# ---------------------------------------------------------------------------------------------
# End of the schedule-baselines section.
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Executor section (owned by pipeline/, issue 8): the tested version range and the runtime that
# runs compute-only Orders on torch's ``_PipelineScheduleRuntime``.
# ---------------------------------------------------------------------------------------------

log = logging.getLogger(__name__)

TESTED_TORCH: Final[tuple[tuple[int, int], tuple[int, int]]] = ((2, 13), (2, 14))
"""Half-open ``[low, high)`` range of (major, minor) torch versions the private names are tested with."""


def _major_minor(version: str) -> tuple[int, int]:
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def is_tested_torch(version: str | None = None) -> bool:
    """True when ``version`` (default: the installed torch) is inside :data:`TESTED_TORCH`."""
    import torch

    low, high = TESTED_TORCH
    return low <= _major_minor(version or torch.__version__) < high


def check_torch_version() -> None:
    """Log a warning when the installed torch is outside :data:`TESTED_TORCH`."""
    if not is_tested_torch():
        import torch

        (lo_major, lo_minor), (hi_major, hi_minor) = TESTED_TORCH
        log.warning(
            "torch %s is outside the range HyperFrame's pipeline adapter is tested with "
            "(>=%d.%d,<%d.%d); torch's private pipelining APIs may have changed",
            torch.__version__,
            lo_major,
            lo_minor,
            hi_major,
            hi_minor,
        )


def to_torch_orders(orders: Orders) -> dict[int, list[Any]]:
    """Compute-only orders as torch ``_Action`` lists; torch's lowering adds the comm ops."""
    out: dict[int, list[Any]] = {}
    for rank in sorted(orders):
        for action in orders[rank]:
            if not action.kind.is_compute:
                raise ScheduleError(
                    f"orders[{rank}]: {action} is a comm action; the executor takes compute-only "
                    "orders (F, I, W, B) and adds the sends and receives itself"
                )
        out[rank] = [to_torch_action(action) for action in orders[rank]]
    return out


class RuntimeSchedule:
    """torch's ``_PipelineScheduleRuntime`` running a given compute-only order.

    torch's gradient scaling is off (``scale_grads=False``): at the REDUCE_GRAD point of each stage
    (after its last W or B of the frame) torch calls ``on_reduce_grad(stage_index)`` instead, where
    the executor scales the stage's gradients and starts their data-parallel all-reduce.
    """

    def __init__(
        self,
        stages: Sequence[Any],
        num_microbatches: int,
        loss_fn: Callable[[Any, Any], Any],
        on_reduce_grad: Callable[[int], None],
    ) -> None:
        from torch.distributed.pipelining.schedules import _ComputationType, _PipelineScheduleRuntime

        check_torch_version()
        self._schedule = _PipelineScheduleRuntime(  # type: ignore[no-untyped-call]
            list(stages), num_microbatches, loss_fn=loss_fn, scale_grads=False
        )

        def _reduce_grad(action: Any, ctx: Any) -> None:
            on_reduce_grad(action.stage_index)

        self._schedule.register_custom_function(_ComputationType.REDUCE_GRAD, _reduce_grad)

    def load_orders(self, orders: Orders) -> None:
        """Validate ``orders`` with torch and lower them to the per-rank compute+comm program.

        Every rank of the pipeline group must load the same orders before its next ``step``.
        """
        torch_orders = to_torch_orders(orders)
        self._schedule.pipeline_order = torch_orders
        self._schedule._prepare_schedule_with_comms(torch_orders)

    def lowered_program(self, rank: int) -> list[str]:
        """Rank ``rank``'s lowered program (compute, SEND/RECV, REDUCE_GRAD) as action strings."""
        return [str(a) for a in self._schedule.pipeline_order_with_comms[rank]]

    def step(self, *args: Any, target: Any, losses: list[Any]) -> None:
        """Run one frame: every micro-batch of ``args`` (batch dim 0) through the loaded order."""
        self._schedule.step(*args, target=target, losses=losses, return_outputs=False)


OpRunner = Callable[[int, OpKind, int, Callable[[], Any]], Any]
"""``run_op(stage, kind, microbatch, fn)``: runs ``fn`` (one F, I, W or B) and returns its result."""


@functools.cache
def _timed_stage_class() -> type[Any]:
    # PipelineStage is public, but forward_one_chunk / backward_one_chunk /
    # backward_weight_one_chunk are the undocumented per-chunk methods the schedule runtime calls;
    # overriding them is the private part, so the subclass lives here.
    from torch.distributed.pipelining import PipelineStage

    class TimedStage(PipelineStage):
        """A PipelineStage that hands each F, I, W and B it runs to ``run_op``."""

        def __init__(self, run_op: OpRunner, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._run_op = run_op

        def forward_one_chunk(self, fwd_chunk_id: int, *args: Any, **kwargs: Any) -> Any:
            return self._run_op(
                self.stage_index,
                OpKind.F,
                fwd_chunk_id,
                lambda: super(TimedStage, self).forward_one_chunk(fwd_chunk_id, *args, **kwargs),
            )

        def backward_one_chunk(
            self,
            bwd_chunk_id: int,
            loss: Any = None,
            full_backward: bool = True,
            last_backward: bool = False,
        ) -> None:
            kind = OpKind.B if full_backward else OpKind.I
            self._run_op(
                self.stage_index,
                kind,
                bwd_chunk_id,
                lambda: super(TimedStage, self).backward_one_chunk(
                    bwd_chunk_id, loss=loss, full_backward=full_backward, last_backward=last_backward
                ),
            )

        def backward_weight_one_chunk(self, bwd_chunk_id: int, last_backward: bool = False) -> None:
            self._run_op(
                self.stage_index,
                OpKind.W,
                bwd_chunk_id,
                lambda: super(TimedStage, self).backward_weight_one_chunk(
                    bwd_chunk_id, last_backward=last_backward
                ),
            )

    return TimedStage


def timed_stage(
    run_op: OpRunner, module: Any, stage_index: int, num_stages: int, device: Any, *, group: Any
) -> Any:
    """A ``PipelineStage`` of ``module`` whose every F, I, W and B runs through ``run_op``."""
    return _timed_stage_class()(run_op, module, stage_index, num_stages, device, group=group)


# ---------------------------------------------------------------------------------------------
# End of the executor section.
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# The backward passes torch's stages run: fused (B) or split into input (I) and weight (W)
# gradients, as ZBV and the planner's split plans run them (``bench.split_backward``).
# ---------------------------------------------------------------------------------------------
def split_backward(
    module: Any, stage_input: Any, output_grad: Any, *, split: bool
) -> tuple[tuple[float, float, float], Any]:
    """Run ``module`` forward on ``stage_input`` and back from ``output_grad`` the way torch's
    pipeline stage does: one fused backward, or the input-gradient pass then the weight-gradient
    pass. Returns the seconds ``(forward, backward or I, W or 0.0)`` on the host clock (CPU) and
    the gradient of ``stage_input``; the parameters' gradients are left in ``.grad``."""
    from torch.distributed.pipelining._backward import (
        stage_backward,
        stage_backward_input,
        stage_backward_weight,
    )

    began = time.perf_counter()
    output = module(stage_input)
    forwarded = time.perf_counter()
    if not split:
        grads = stage_backward([output], [output_grad], [stage_input])
        return (forwarded - began, time.perf_counter() - forwarded, 0.0), grads[0]
    input_grads, groups = stage_backward_input([output], [output_grad], [stage_input], module.parameters())
    input_done = time.perf_counter()
    stage_backward_weight(module.parameters(), groups)
    return (forwarded - began, input_done - forwarded, time.perf_counter() - input_done), input_grads[0]
