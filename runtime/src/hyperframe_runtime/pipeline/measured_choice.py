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
- planning in a helper process of global rank 0 (``pipeline.replanner``) while frames go on. The
  answer is taken :data:`PLAN_LAG_FRAMES` frames after the job was sent, at the same frame on
  every rank (rank 0 waits for it there if the helper is slower, and broadcasts it), so which
  frame runs which plan depends on what the run measured and planned, never on how fast the
  helper was;
- a re-planned order that challenges the winner is held apart from the candidate's plan until it
  wins its paired frames;
- :meth:`MeasuredChoice.to_json`: all of the above as JSON for the snapshot, from which a resumed
  run goes on exactly where it stopped (exploring, mid-check, or waiting for a plan);
- torch schedules whose activation peak is over the byte budget are dropped (``pipeline.memory``);
- each plan's activation peak in micro-batch activations per rank, the selector's tie-break.

The frame loop calls :meth:`MeasuredChoice.next_plan` before a frame and :meth:`observe` after it.
"""

from __future__ import annotations

import logging
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Set
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
from hyperframe_runtime.pipeline.replanner import BackgroundPlanner, PlanJob
from hyperframe_runtime.pipeline.selection import Record, ScheduleSelector, Step
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import OpKind, Placement
from hyperframe_runtime.schedule.simulate import memory_peaks

__all__ = ["PLAN_LAG_FRAMES", "WINDOW_FRAMES", "FrameOutcome", "MeasuredChoice", "twin_of"]

log = logging.getLogger("hyperframe.train")

WINDOW_FRAMES: Final = 4
"""Measured frames per placement kept for calibration (per replica)."""
PLAN_LAG_FRAMES: Final = 3
"""Frames between sending a planning job and taking its answer. Long enough that the helper is
usually done (the planner's search is sized by ``planner_time_budget_s``), so the wait at that
frame is usually nil; fixed, so that a slow helper on a loaded host delays nothing but that
frame's boundary (``replan_s``)."""


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
        state: Mapping[str, Any] | None = None,
        forced: Mapping[str, FramePlan] | None = None,
        num_layers: int | None = None,
    ) -> None:
        """``state``: a snapshot's :meth:`to_json`; the run goes on from it (exploring,
        checking, or planning as it was). ``forced`` replaces the plans of named candidates (a test
        forces a bad plan on the planner's candidate to see it abandoned). ``num_layers``: the
        layers the model can be cut between (``candidate_plans``)."""
        self.config = config
        self.is_reporter = is_reporter
        candidates, self.plans = candidate_plans(config, num_layers=num_layers)
        self.plans.update(forced or {})
        self.selector = ScheduleSelector(candidates, replan_every=config.replan_every)
        self.selector.set_ready(list(forced or {}))
        self.selector.set_peaks({name: _unit_peak(plan) for name, plan in self.plans.items()})
        self.planner = BackgroundPlanner() if is_reporter else None
        self.calibrations: dict[Placement, Calibration] = {}
        self._windows: dict[Placement, list[RankFrame]] = defaultdict(list)
        self._predicted: dict[tuple[int, int], float] = {}
        self._job: PlanJob | None = None
        """The planning job in flight (every rank holds it; rank 0's helper runs it)."""
        self._due = 0
        """The frame (``selector.record.frames``) at which the job's answer is taken."""
        self.challenge: FramePlan | None = None
        """A re-planned order challenging the winner, until its paired frames decide."""
        self._replans = 0
        self._cost_logged = False
        if state is not None:
            self._restore(state)

    # ---- resume ------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """Everything this choice measured, planned and decided, for the snapshot."""
        names = {c.name for c in self.selector.candidates if c.is_planner}
        return {
            "record": self.selector.record.to_json(),
            "plans": {n: p.to_json() for n, p in self.plans.items() if n in names},
            "challenge": self.challenge.to_json() if self.challenge is not None else None,
            "windows": [
                [list(placement.stage_to_rank), [r.to_json() for r in window]]
                for placement, window in self._windows.items()
            ],
            "job": self._job.to_json() if self._job is not None else None,
            "due": self._due,
            "replans": self._replans,
        }

    def _restore(self, state: Mapping[str, Any]) -> None:
        self.selector.record = Record.from_json(state["record"])
        self.plans.update({n: FramePlan.from_json(p) for n, p in state["plans"].items()})
        self.challenge = FramePlan.from_json(state["challenge"]) if state["challenge"] else None
        for stage_to_rank, window in state["windows"]:
            placement = Placement(tuple(stage_to_rank))
            self._windows[placement] = [RankFrame.from_json(r) for r in window]
            self.calibrations[placement] = calibrate(self._windows[placement], placement)
        self._due, self._replans = int(state["due"]), int(state["replans"])
        if state["job"] is not None:  # it was planning: plan the same job again, due as before
            self._job = PlanJob.from_json(state["job"])
            if self.planner is not None:
                self.planner.submit(self._job)

    # ---- before a frame ----------------------------------------------------------------------------
    def next_plan(self) -> tuple[Step, FramePlan]:
        """The selector's next step and the plan it runs."""
        step = self.selector.next_step()
        if step.challenge and self.challenge is not None:
            return step, self.challenge
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
        replan_seconds: Callable[[], list[float]],
    ) -> FrameOutcome:
        """Feed the selector this frame's outcome; calibrate, start and receive plans (collective
        at the frame a plan is due). ``replan_seconds`` gives the re-planning seconds of the run's
        frames so far (for the exploration-cost log line)."""
        selector = self.selector
        placement = plan.placement
        over: dict[str, str] = {}
        if ranks and not step.warm and (step.gather or replan_due):
            self._calibrate(placement, ranks, restart=replan_due)
            torch_plans = {n: p for n, p in self.plans.items() if not selector.candidate(n).is_planner}
            over = over_budget(self.config, torch_plans, self.calibrations)
            selector.set_predicted(
                {n: self._predict(self.plans[n]) for n in selector.record.ready if n in self.plans}
            )
        verdict = selector.observe(step, frame_s)
        if verdict.adopted and self.challenge is not None:
            self.plans[verdict.adopted] = self.challenge
            selector.set_peaks({verdict.adopted: _unit_peak(self.challenge)})
            self.challenge = None
        elif verdict.rejected:
            self.challenge = None
        for name, why in over.items():  # after observe: a dropped schedule keeps no times
            selector.drop(name, why)
        targets = selector.needs_planning()
        if replan_due:
            target = selector.replan_target()
            targets = [target] if target else []
        if targets and self._job is None:
            job = planning_job(self.config, {n: selector.placement_of(n) for n in targets}, self.calibrations)
            if job.requests:
                selector.planning_started()
                self._job, self._due = job, selector.record.frames + PLAN_LAG_FRAMES
                if self.planner is not None:
                    self.planner.submit(job)
        planner_s = 0.0
        if self._job is not None and selector.record.frames >= self._due:
            planner_s = self._receive()
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
        self.selector.calibrated(placement)

    def _receive(self) -> float:
        """Take the planner's answer from rank 0 (collective; rank 0 waits for its helper if it is
        not done yet); its planning seconds."""
        selector = self.selector
        box: list[Any] = [self.planner.wait() if self.planner is not None else None]
        dist.broadcast_object_list(box, src=0)
        self._job = None
        outcomes, planner_s = box[0]
        self._replans += 1
        fresh: list[FramePlan] = []
        for outcome in outcomes:
            plan = plan_from_outcome(self.config, outcome, replans=self._replans)
            selector.set_predicted({outcome.name: self._predict(plan)})
            twin = twin_of(self.plans, selector.record.ready, plan)
            if selector.exploring:  # kept even when it repeats another order: it is what was planned
                self.plans[plan.schedule] = plan
                selector.set_peaks({plan.schedule: _unit_peak(plan)})
            if twin:  # the same order as another schedule, or as the plan it would replace
                selector.duplicate(outcome.name, twin)
            else:
                fresh.append(plan)
        if (
            fresh and not selector.exploring
        ):  # a re-plan: it challenges the winner before it replaces anything
            self.challenge = fresh[0]
        selector.plans_ready([p.schedule for p in fresh])
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
        pace = statistics.median(selector.times.get(selector.winner) or (1.0,))
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


def twin_of(plans: Mapping[str, FramePlan], ready: Set[str], plan: FramePlan) -> str:
    """The ready schedule whose order ``plan`` repeats ("" if none), the plan it would replace
    included: a re-plan that found the running order again changed nothing."""
    return next(
        (
            n
            for n, other in plans.items()
            if n in ready and other.placement == plan.placement and other.orders == plan.orders
        ),
        "",
    )


def _unit_peak(plan: FramePlan) -> float:
    """The largest rank's activation peak of ``plan`` in stage activations (one unit per stage
    and micro-batch): what the order alone holds, comparable between plans of one placement."""
    unit = CostModel.uniform(plan.placement.num_stages)
    return max(memory_peaks(plan.orders, plan.placement, unit)[1])
