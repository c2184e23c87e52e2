"""The single home of private ``torch.distributed.pipelining`` names.

Every private torch name (``_Action``, ``_ComputationType``, ``_PipelineScheduleRuntime``,
``pipeline_order`` internals, ...) used anywhere in HyperFrame is reached through this module, so
a torch upgrade touches one file. Tested torch range: 2.12 to 2.15 (``torch>=2.12,<2.16``), pinned
2.13.0 in requirements-dev.txt.
"""

from __future__ import annotations

import types
from typing import Any

from hyperframe_runtime.schedule.ir import Action, OpKind, Orders, ScheduleError

__all__ = [
    "TORCH_SCHEDULE_CLASSES",
    "from_torch_action",
    "to_torch_action",
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

    cls = getattr(schedules, TORCH_SCHEDULE_CLASSES[name])
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
