"""The schedules the hyperframe policy measures, and what the planner is asked to plan.

Candidates (``pipeline.selection``), where the layout allows them:

- ``1f1b``, ``gpipe`` and ``hyperframe-1`` (the planner's) on one stage per rank (``gpipe`` holds
  all m micro-batches' activations at once, so on a GPU only when ``memory_limit`` allows it);
- ``zbv`` and ``hyperframe-v`` on the V (two stages per rank);
- ``interleaved1f1b`` on the looped placement (two stages per rank; m a multiple of p).

``stages_per_rank`` 0 (auto) allows every placement the model can be cut into; 1 or 2 pins the
placement. A model with ``num_layers`` layers it can be cut between (``num_layers``: the built-in
GPT's blocks, a ``TorchModel``'s pieces, a ``ModelSpec``'s per-layer hook) can be cut into p
stages when it has at least p layers, into 2p when it has at least 2p; a ``ModelSpec`` without
the per-layer hook keeps its configured placement (its ``build_stage`` is not known to accept
other stage counts). With a ``memory_limit``, torch's schedules whose peak
exceeds it are left out (the planner's plans respect it by construction); with a
``memory_limit_bytes``, once their placement's activation bytes are measured (:func:`over_budget`).
The planner gets the same budget (``pipeline.memory``).

The V and the looped placement cut the model into the same 2p stages, so costs measured on one
hold for the other; the p stages of one stage per rank are pairs of them (``restage``). On a
placement where only a split backward (I, W) was measured, a fused B is costed as ``I + W``
scaled by the ratio measured between one stage per rank's B and the paired I + W (the second
autograd pass of a split backward costs extra on some devices), so the planner can plan both
ways and keep the better prediction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.pipeline.calibration import Calibration, planning_costs, restage
from hyperframe_runtime.pipeline.memory import checked_budget, fits_budget, in_bytes, memory_budget
from hyperframe_runtime.pipeline.planning import FramePlan
from hyperframe_runtime.pipeline.replanner import PlanJob, PlanOutcome, PlanRequest
from hyperframe_runtime.pipeline.selection import Candidate
from hyperframe_runtime.schedule.baselines import baseline
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Placement, ScheduleError
from hyperframe_runtime.schedule.simulate import memory_peaks

__all__ = ["candidate_plans", "hyperframe_candidates", "over_budget", "plan_from_outcome", "planning_job"]

_ORDER: Final[tuple[tuple[str, str, int], ...]] = (
    ("1f1b", "1F1B", 1),
    ("gpipe", "GPipe", 1),
    ("hyperframe-1", "", 1),
    ("interleaved1f1b", "Interleaved1F1B", 2),
    ("zbv", "ZBVZeroBubble", 2),
    ("hyperframe-v", "", 2),
)
"""(candidate name, ``schedule.baselines`` name or "" for the planner's, stages per rank), in the
order they are measured: grouped by placement, each planner candidate after the torch schedules
whose costs it is planned from (the looped placement's fused B and the V's split I/W both feed
``hyperframe-v``)."""


def _placements_allowed(config: TrainConfig, num_layers: int | None) -> set[int]:
    per_rank = {config.stages_per_rank} if config.stages_per_rank else {1, 2}
    if num_layers is None:
        if config.model != "gpt":
            return {config.effective_stages_per_rank}  # a hand-split ModelSpec: its own stage count
        num_layers = config.n_layers
    return {k for k in per_rank if num_layers >= k * config.pipeline}


def candidate_plans(
    config: TrainConfig, *, num_layers: int | None = None
) -> tuple[list[Candidate], dict[str, FramePlan]]:
    """The candidates of ``config`` (hyperframe policy) and the plans of torch's ones."""
    allowed = _placements_allowed(config, num_layers)
    p, m = config.pipeline, config.microbatches_per_frame
    candidates: list[Candidate] = []
    plans: dict[str, FramePlan] = {}
    for name, torch_name, per_rank in _ORDER:
        if per_rank not in allowed:
            continue
        if name == "interleaved1f1b" and m % p:
            continue  # torch's runtime needs m a multiple of p (as the interleaved1f1b policy)
        if (
            name == "gpipe"
            and config.device != "cpu"
            and not (config.memory_limit or config.memory_limit_bytes)
        ):
            continue  # all m activations in flight: on an accelerator only under an explicit limit
        if not torch_name:
            placement = Placement.vshape(p) if per_rank == 2 else Placement.one_per_rank(p)
            candidates.append(Candidate(name, placement))
            continue
        try:
            chosen = baseline(torch_name, p, m)
        except (ScheduleError, ValueError, RuntimeError):
            continue  # torch cannot build it for this (p, m)
        unit = CostModel.uniform(chosen.placement.num_stages)
        if config.memory_limit and not fits_budget(config, chosen.orders, chosen.placement, unit, m):
            continue  # over in units, so over in bytes too (the limit is in heaviest stages)
        candidates.append(Candidate(name, chosen.placement, torch_name))
        plans[name] = FramePlan(config.policy, chosen.placement, chosen.orders, m, schedule=name)
    return candidates, plans


def hyperframe_candidates(config: TrainConfig, *, num_layers: int | None = None) -> list[Candidate]:
    return candidate_plans(config, num_layers=num_layers)[0]


def _source(placement: Placement, calibrations: Mapping[Placement, Calibration]) -> Calibration | None:
    """The calibration that holds for ``placement``: its own, else one of the same stage count,
    else one of a finer cut (merged)."""
    if placement in calibrations:
        return calibrations[placement]
    same = [c for pl, c in calibrations.items() if pl.num_stages == placement.num_stages]
    if same:
        return same[0]
    finer = [c for pl, c in calibrations.items() if pl.num_stages % placement.num_stages == 0]
    return finer[0] if finer else None


def _fused_ratio(calibrations: Mapping[Placement, Calibration]) -> float:
    """Measured fused B over the paired split I + W (1.0 when not both were measured)."""
    fused = [c for c in calibrations.values() if not c.split_measured]
    split = [c for c in calibrations.values() if c.split_measured]
    for f in fused:
        for s in split:
            if s.costs.num_stages % f.costs.num_stages == 0:
                merged = restage(s.costs, f.costs.num_stages)
                iw = sum(merged.backward_input) + sum(merged.backward_weight)
                b = sum(f.costs.backward_input) + sum(f.costs.backward_weight)
                return b / iw if iw > 0 else 1.0
    return 1.0


def planning_job(
    config: TrainConfig,
    targets: Mapping[str, Placement],
    calibrations: Mapping[Placement, Calibration],
) -> PlanJob:
    """The job planning each of ``targets`` (name -> placement) from the measured calibrations."""
    ratio = _fused_ratio(calibrations)
    requests = []
    for name, placement in targets.items():
        calib = _source(placement, calibrations)
        if calib is None:
            continue
        n = placement.num_stages
        variants: list[tuple[bool, CostModel]] = []
        split_known = calib.split_measured or any(
            c.split_measured and c.costs.num_stages % n == 0 for c in calibrations.values()
        )
        if split_known:
            split_calib = calib
            if not calib.split_measured:
                other = next(
                    c for c in calibrations.values() if c.split_measured and c.costs.num_stages % n == 0
                )
                split_calib = replace(other, op_overhead_s=calib.op_overhead_s)
            variants.append((True, planning_costs(split_calib, split_backward=True, num_stages=n)))
        fused_calib = calib
        if calib.split_measured:
            c = calib.costs
            fused_calib = replace(
                calib,
                costs=replace(
                    c,
                    backward_input=tuple(x * ratio for x in c.backward_input),
                    backward_weight=tuple(x * ratio for x in c.backward_weight),
                ),
            )
        variants.append((False, planning_costs(fused_calib, split_backward=False, num_stages=n)))
        budget = checked_budget(config, variants[-1][1], placement)
        requests.append(PlanRequest(name, placement, tuple(variants), budget))
    # The configured budget is for the whole job: each of its planner calls gets an equal share.
    calls = max(1, sum(len(r.variants) for r in requests))
    return PlanJob(
        requests=tuple(requests),
        num_microbatches=config.microbatches_per_frame,
        time_budget_s=(config.planner_time_budget_s or 0.2) / calls,
    )


def over_budget(
    config: TrainConfig, plans: Mapping[str, FramePlan], calibrations: Mapping[Placement, Calibration]
) -> dict[str, str]:
    """Torch's schedules among ``plans`` whose activation peak, on the measured bytes of their
    placement, is over the configured limit: name -> why (for the log). Nothing without a limit."""
    if not (config.memory_limit or config.memory_limit_bytes):
        return {}
    out: dict[str, str] = {}
    for name, chosen in plans.items():
        calib = _source(chosen.placement, calibrations)
        if calib is None or not in_bytes(calib.costs):
            continue
        costs = restage(calib.costs, chosen.placement.num_stages)
        m = chosen.num_microbatches
        if not fits_budget(config, chosen.orders, chosen.placement, costs, m):
            peak = max(memory_peaks(chosen.orders, chosen.placement, costs)[1])
            field = "memory_limit_bytes" if config.memory_limit_bytes else "memory_limit"
            budget = memory_budget(config, costs) or 0.0
            out[name] = (
                f"its activation peak {peak / 2**20:.2f} MiB per rank (measured bytes) is over "
                f"{field} ({budget / 2**20:.2f} MiB)"
            )
    return out


def plan_from_outcome(config: TrainConfig, outcome: PlanOutcome, *, replans: int) -> FramePlan:
    return FramePlan(
        policy=config.policy,
        placement=outcome.placement,
        orders=outcome.orders,
        num_microbatches=config.microbatches_per_frame,
        predicted_makespan=outcome.predicted_makespan,
        costs=outcome.costs,
        replans=replans,
        split_backward=outcome.split_backward,
        schedule=outcome.name,
    )
