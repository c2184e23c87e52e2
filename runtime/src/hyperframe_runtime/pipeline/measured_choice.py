"""The hyperframe policy in a run: candidate plans, calibration, background planning, the choice.

:class:`~hyperframe_runtime.pipeline.selection.ScheduleSelector` decides, from frame times,
which candidate schedule runs next (pure). This module is what feeds it in a real run, on every
rank alike:

- the candidates' plans: torch's orders, and the planner's, made from unit costs until the
  measured costs arrive;
- the calibration of each placement from all-gathered op records
  (``pipeline.calibration``), kept over the last :data:`WINDOW_FRAMES` measured frames;
- the predicted frame time of each plan and of the frame about to run, and the drift of this
  rank's op costs from the calibrated ones;
- planning in a helper process of global rank 0 (``pipeline.replanner``) while frames go on; when
  its answer is in, rank 0 raises a flag in the per-frame summaries and broadcasts the plans, which
  every rank takes at the same frame;
- torch schedules whose activation peak is over the byte budget are dropped (``pipeline.memory``);
- each plan's activation peak in micro-batch activations per rank, the selector's tie-break.

The frame loop calls :meth:`MeasuredChoice.next_plan` before a frame and :meth:`observe` after it.
"""

from __future__ import annotations

import logging
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

import torch.distributed as dist

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.pipeline.calibration import Calibration, calibrate, predict_frame_s
from hyperframe_runtime.pipeline.candidates import (
    candidate_plans,
    over_budget,
    plan_from_outcome,
    planning_job,
)
from hyperframe_runtime.pipeline.metrics import RankFrame, RankSummary
from hyperframe_runtime.pipeline.planning import FramePlan, costs_from_samples, plan_from_costs
from hyperframe_runtime.pipeline.replanner import BackgroundPlanner, PlanOutcome
from hyperframe_runtime.pipeline.selection import ScheduleSelector, Step
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import OpKind, Placement
from hyperframe_runtime.schedule.simulate import memory_peaks

__all__ = ["WINDOW_FRAMES", "FrameOutcome", "MeasuredChoice"]

log = logging.getLogger("hyperframe.train")

WINDOW_FRAMES: Final = 4
"""Measured frames per placement kept for calibration (per replica)."""


@dataclass(frozen=True)
class FrameOutcome:
    """What :meth:`MeasuredChoice.observe` made of one frame."""

    planner_s: float = 0.0
    """The background planner's seconds of plans received in this frame (0 otherwise)."""
    events: tuple[str, ...] = ()
    """The selector's decisions in this frame, for the log and ``TrainResult.events``."""


class MeasuredChoice:
    """One rank's side of the hyperframe policy (collective where noted; every rank feeds it the
    same all-gathered numbers, so every rank makes the same choice in the same frame)."""

    def __init__(
        self,
        config: TrainConfig,
        *,
        is_reporter: bool,
        saved: FramePlan | None = None,
        forced: Mapping[str, FramePlan] | None = None,
        num_layers: int | None = None,
    ) -> None:
        """``saved``: a snapshot's plan, exploited from the first frame when it is one of the
        candidates (a resumed run does not explore again). ``forced`` replaces the plans of named
        candidates (a test forces a bad plan on the planner's candidate to see it abandoned).
        ``num_layers``: the layers the model can be cut between (``candidate_plans``)."""
        self.config = config
        self.is_reporter = is_reporter
        candidates, self.plans = candidate_plans(config, num_layers=num_layers)
        self.plans.update(forced or {})
        start = ""
        if saved is not None and saved.schedule in {c.name for c in candidates}:
            start = saved.schedule
            self.plans[start] = saved
        self.selector = ScheduleSelector(candidates, replan_every=config.replan_every, start=start)
        self.selector.ready.update(forced or {})
        for name, plan in self.plans.items():
            self.selector.peaks[name] = _unit_peak(plan)
        self.planner = BackgroundPlanner() if is_reporter else None
        self.calibrations: dict[Placement, Calibration] = {}
        self._windows: dict[Placement, list[RankFrame]] = defaultdict(list)
        self._predicted: dict[tuple[int, int], float] = {}
        self._answer: tuple[tuple[PlanOutcome, ...], float] | None = None
        self._replans = 0
        self._cost_logged = False

    # ---- before a frame ----------------------------------------------------------------------------
    def next_plan(self) -> tuple[Step, FramePlan]:
        """The selector's next step and the plan it runs."""
        step = self.selector.next_step()
        return step, self.plan_of(step.name)

    def plan_of(self, name: str) -> FramePlan:
        """The plan of candidate ``name``; a planner candidate not yet planned from measured
        costs runs its unit-cost plan."""
        if name not in self.plans:
            placement = self.selector.placement_of(name)
            unit = plan_from_costs(self.config, placement, CostModel.uniform(placement.num_stages))
            self.plans[name] = replace(unit, schedule=name)
        return self.plans[name]

    def prediction(self, plan: FramePlan) -> float:
        """The calibrated prediction of ``plan``'s next frame (0 before its placement is calibrated)."""
        calibration = self.calibrations.get(plan.placement)
        if calibration is None:
            return 0.0
        key = (id(plan), id(calibration))
        if key not in self._predicted:
            self._predicted = {key: self._predict(plan)}
        return self._predicted[key]

    # ---- after a frame -----------------------------------------------------------------------------
    def drift(self, plan: FramePlan, mine: RankFrame) -> float:
        """Largest relative drift of this rank's per-stage op cost (F + B per micro-batch) from the
        calibrated costs of ``plan``'s placement. Both sides are medians per op kind (as the
        calibration is): a mean would let one slow op (the frame's first forward, a scheduler
        hiccup) read as a cost change and trigger re-plans that change nothing."""
        calibration = self.calibrations.get(plan.placement)
        if calibration is None or not mine.records:
            return 0.0
        ref = calibration.costs
        measured = costs_from_samples(
            ((stage, kind, end - start) for stage, kind, _, start, end, _ in mine.records), plan.placement
        )
        drift = 0.0
        for stage in {record[0] for record in mine.records}:
            expected = ref.base_cost(stage, OpKind.F) + ref.base_cost(stage, OpKind.B)
            got = measured.base_cost(stage, OpKind.F) + measured.base_cost(stage, OpKind.B)
            if expected > 0:
                drift = max(drift, abs(got / expected - 1.0))
        return drift

    def answer_ready(self) -> bool:
        """Whether the background planner's answer is in (rank 0; the others never have one)."""
        if self.planner is not None and self._answer is None:
            self._answer = self.planner.poll()
        return self._answer is not None

    def replan_due(self, summaries: list[RankSummary]) -> bool:
        """Feed the largest drift of this frame; True when a re-plan is due."""
        return self.selector.observe_drift(max(s.drift for s in summaries))

    def observe(
        self,
        step: Step,
        plan: FramePlan,
        frame_s: float,
        ranks: list[RankFrame],
        replan_due: bool,
        summaries: list[RankSummary],
        replan_seconds: Callable[[], list[float]],
    ) -> FrameOutcome:
        """Feed the selector this frame's outcome; calibrate, start and receive plans (collective
        when a summary carries the plan-ready flag). ``replan_seconds`` gives the re-planning
        seconds of the run's frames so far (for the exploration-cost log line)."""
        selector = self.selector
        placement = plan.placement
        over: dict[str, str] = {}
        if ranks and not step.warm and (step.gather or replan_due):
            self._calibrate(placement, ranks, restart=replan_due)
            torch_plans = {n: p for n, p in self.plans.items() if not selector.candidate(n).is_planner}
            over = over_budget(self.config, torch_plans, self.calibrations)
            for name in selector.ready:
                if name in self.plans:
                    selector.predicted[name] = self._predict(self.plans[name])
        selector.observe(step, frame_s)
        for name, why in over.items():  # after observe: a dropped schedule keeps no times
            selector.drop(name, why)
        targets = selector.needs_planning()
        if replan_due:
            target = selector.replan_target()
            targets = [target] if target else []
        if targets:
            job = planning_job(self.config, {n: selector.placement_of(n) for n in targets}, self.calibrations)
            if job.requests:
                selector.planning_started()
                if self.planner is not None:
                    self.planner.submit(job)
        planner_s = self._receive() if any(s.flag for s in summaries) else 0.0
        events = tuple(selector.events)
        selector.events.clear()
        if not selector.exploring and selector.explore_s and not step.exploring:
            self._log_exploration_cost(replan_seconds)
        return FrameOutcome(planner_s=planner_s, events=events)

    def _calibrate(self, placement: Placement, ranks: list[RankFrame], *, restart: bool) -> None:
        window = self._windows[placement]
        if restart:  # the costs changed: calibrate from now on
            window.clear()
        window.extend(ranks)
        frames = sorted({r.frame for r in window})[-WINDOW_FRAMES:]
        window[:] = [r for r in window if r.frame in frames]
        self.calibrations[placement] = calibrate(window, placement)
        self.selector.calibrated.add(placement)

    def _receive(self) -> float:
        """Take the planner's answer from rank 0 (collective); its planning seconds."""
        selector = self.selector
        box: list[Any] = [self._answer]
        dist.broadcast_object_list(box, src=0)
        self._answer = None
        outcomes, planner_s = box[0]
        self._replans += 1
        fresh = []
        for outcome in outcomes:
            plan = plan_from_outcome(self.config, outcome, replans=self._replans)
            self.plans[outcome.name] = plan
            selector.predicted[outcome.name] = self._predict(plan)
            selector.peaks[outcome.name] = _unit_peak(plan)
            twin = next(
                (
                    n
                    for n, other in self.plans.items()
                    if n != outcome.name
                    and n in selector.ready
                    and other.placement == plan.placement
                    and other.orders == plan.orders
                ),
                "",
            )
            if twin:
                selector.duplicate(outcome.name, twin)
            else:
                fresh.append(outcome.name)
        selector.plans_ready(fresh)
        return float(planner_s)

    def _predict(self, plan: FramePlan) -> float:
        calibration = self.calibrations.get(plan.placement) or self._related_calibration(plan.placement)
        if calibration is None:
            return 0.0
        return predict_frame_s(plan.orders, plan.placement, calibration, plan.num_microbatches)

    def _related_calibration(self, placement: Placement) -> Calibration | None:
        """A calibration of another placement with the same, a finer or a coarser stage count."""
        known = self.calibrations.items()
        same = [c for p, c in known if p.num_stages == placement.num_stages]
        finer = [c for p, c in known if p.num_stages % placement.num_stages == 0]
        coarser = [c for p, c in known if placement.num_stages % p.num_stages == 0]
        found = same or finer or coarser
        return found[0] if found else None

    def _log_exploration_cost(self, replan_seconds: Callable[[], list[float]]) -> None:
        if self._cost_logged or not self.is_reporter:
            return
        self._cost_logged = True
        selector = self.selector
        cost = selector.exploration_cost_s() + sum(replan_seconds())
        pace = statistics.median(selector.times.get(selector.winner) or [1.0])
        log.info(
            "exploration cost %.3fs over %d frames = %.1f%% of a 100-frame run at the winner's pace",
            cost,
            len(selector.explore_s),
            100 * cost / (100 * pace),
        )

    def close(self) -> None:
        if self.planner is not None:
            self.planner.close()
            self.planner = None


def _unit_peak(plan: FramePlan) -> float:
    """The largest rank's activation peak of ``plan`` in stage activations (one unit per stage
    and micro-batch): what the order alone holds, comparable between plans of one placement."""
    unit = CostModel.uniform(plan.placement.num_stages)
    return max(memory_peaks(plan.orders, plan.placement, unit)[1])
