"""The frame loop: frames of micro-batches, one optimizer step per frame, schedules chosen by measurement.

Per frame, on every rank:

1. (hyperframe policy, ``replan_every`` > 0) the measured choice (``pipeline.measured_choice``,
   around the selector of ``pipeline.selection``) names the schedule this frame runs; switching
   to it between frames may move the stages to another placement (``pipeline.stages``);
2. the data of this frame and replica, inside the frame timer (``hyperframe_runtime.data``: the
   model's ``make_batch``, a pure function of the frame index, or a DataLoader over token shards
   or a user dataset, whose position every snapshot saves: exact resume either way);
3. the executor runs the frame's order (forward, backward, DP gradient all-reduce from each stage's
   REDUCE_GRAD point, waited for at the end);
4. the recipe (``pipeline.recipe``): the gradients are clipped to the global norm (over every
   pipeline stage, after the DP average) when ``grad_clip_norm`` is set, the frame's learning rate
   is set from the schedule, and the optimizer steps;
5. the ranks all-gather a fixed handful of numbers each (frame time, loss, cost drift, data
   wait): enough for the metrics and for every rank to make the same decisions. The
   per-op records are all-gathered only when a frame needs them: to calibrate the cost model and
   plan (exploring, or a re-plan due to cost drift), or for the trace when ``trace_dir`` is set;
6. planning runs in a helper process of global rank 0 (``pipeline.replanner``) while frames go
   on; a fixed number of frames later (``measured_choice.PLAN_LAG_FRAMES``) rank 0 broadcasts
   its answer, waiting for it if need be, and the plans run from the next frame;
7. global rank 0 writes metrics (measured and predicted frame time, re-plan cost), the trace and
   the TensorBoard scalars (``pipeline.trace``, ``pipeline.board``; flushed every frame), calls
   the model's ``frame_metrics`` and hands progress to the reporter, which posts it from its own
   thread (``hyperframe_runtime.progress``);
8. every ``checkpoint_every`` frames, and after the last, a DCP snapshot with the plan, the data
   loader's position, and each rank's schedule position and RNG state (a resume continues all of
   them exactly).
9. the ranks agree whether any of them got SIGTERM (``pipeline.preemption``); if one did, every
   rank writes this frame's snapshot (unless step 8 just did) and the loop stops, preempted.

With a measured layer split (``layer_split = "measured"``, or ``"auto"`` under the hyperframe
policy: ``TrainConfig.measures_layer_split``) the first ``PARTITION_FRAMES`` frames come before all this: they
run the even layer split and gather every rank's op timings; then the layers are re-split by the
measured per-layer costs and rank speeds (``pipeline.partitioning``), the stages move to the new
split, and the schedule selector starts on it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.data.loader import BatchSource, open_batches, timed
from hyperframe_runtime.models.spec import ModelSpec, load_model_spec
from hyperframe_runtime.pipeline import checkpoint
from hyperframe_runtime.pipeline.board import BoardWriter
from hyperframe_runtime.pipeline.calibration import calibrate
from hyperframe_runtime.pipeline.candidates import candidate_plans
from hyperframe_runtime.pipeline.executor import PipelineExecutor
from hyperframe_runtime.pipeline.measured_choice import MeasuredChoice
from hyperframe_runtime.pipeline.memory import PlanPeaks
from hyperframe_runtime.pipeline.metrics import (
    FrameMetrics,
    RankFrame,
    exchange_summaries,
    metrics_from_summaries,
    peak_memory_bytes,
    reset_peak_memory,
)
from hyperframe_runtime.pipeline.partitioning import (
    PARTITION_FRAMES,
    SPLIT_MARGIN,
    LayerProfile,
    even_split,
    second_look_tells,
    two_look_profile,
)
from hyperframe_runtime.pipeline.planning import FramePlan, initial_plan
from hyperframe_runtime.pipeline.preemption import StopFlag, agree_to_stop
from hyperframe_runtime.pipeline.recipe import (
    LrSchedule,
    LrScheduler,
    clip_grad_norm,
    rng_state,
    set_rng_state,
)
from hyperframe_runtime.pipeline.selection import ScheduleSelector, Step
from hyperframe_runtime.pipeline.stages import StageContext, StageSet
from hyperframe_runtime.pipeline.tied import norm_params, sum_tied_grads
from hyperframe_runtime.pipeline.topology import Topology, build_groups
from hyperframe_runtime.pipeline.trace import TraceWriter
from hyperframe_runtime.progress import ProgressReporter, ProgressUpdate, bounded_metrics
from hyperframe_runtime.schedule.costs import CostModel

__all__ = ["FrameLoop", "TrainResult", "train"]

log = logging.getLogger("hyperframe.train")


@dataclass
class TrainResult:
    """What a call to :func:`train` did (the same on every rank)."""

    start_frame: int
    """Frames already done when this call started (from a snapshot), 0 for a fresh run."""
    metrics: list[FrameMetrics] = field(default_factory=list)
    """One entry per frame run by this call."""
    plans: list[FramePlan] = field(default_factory=list)
    """The plan each of those frames ran."""
    snapshots: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    """The schedule selector's decisions (hyperframe policy) and layer re-splits, as logged."""
    profile: LayerProfile | None = None
    """The measured layer profile the stages were split by (``layer_split = "measured"``)."""
    preempted: bool = False
    """A rank got SIGTERM: the run stopped at a frame boundary (after that frame's snapshot)."""


class FrameLoop:
    """One rank's training state (stages, optimizer, executor, plan) and the frame loop over it.

    Construction is collective (process groups, resume from the newest snapshot); so is every
    :meth:`run_frame`. :func:`train` is the whole loop; tests drive frames one by one.
    ``forced_plans`` replaces the plans of named candidates (a test forces a bad plan on the
    planner's candidate to see it abandoned). ``stop`` is the flag the SIGTERM handler sets
    (``pipeline.preemption``); :meth:`run` stops at the first frame boundary where any rank's
    flag is set.
    """

    def __init__(
        self,
        config: TrainConfig,
        *,
        spec: ModelSpec | None = None,
        device: torch.device | None = None,
        forced_plans: dict[str, FramePlan] | None = None,
        stop: StopFlag | None = None,
    ) -> None:
        config.check_world_size(dist.get_world_size())
        self.config = config
        self.stop = stop or StopFlag()
        self.snapshot_root = checkpoint.job_dir(config.checkpoint_dir, config.job_id)
        self.device = device or torch.device("cpu")
        self.spec = spec or load_model_spec(config)
        self.topology = Topology(dist.get_rank(), config.pipeline, config.data)
        self.groups = build_groups(self.topology)
        torch.manual_seed(config.seed)

        self.plan = initial_plan(config)
        self.frames_done = 0
        snapshot = checkpoint.resume_snapshot(self.snapshot_root) if config.checkpoint_dir else None
        if snapshot is not None:
            checkpoint.check_snapshot_matches(snapshot, config.to_dict(), dist.get_world_size())
        saved = FramePlan.from_json(snapshot.plan) if snapshot is not None else None
        saved_choice = snapshot.plan.get("choice") if snapshot is not None else None
        saved_look = snapshot.plan.get("partition") if snapshot is not None else None

        # A measured layer split: the first frames run the even split and time every op, then
        # the layers are re-split (_repartition); a snapshot taken after that carries the profile.
        profile_json = snapshot.plan.get("layer_profile") if snapshot is not None else None
        profile = LayerProfile.from_json(profile_json) if profile_json else None
        has_hook = self.spec.has_layer_hook
        self._num_layers = self.spec.num_layers if has_hook else None
        # A snapshot taken during a look carries the look (``_look_state``): it goes on.
        self._partitioning = config.measures_layer_split(has_hook) and (
            profile is None or saved_look is not None
        )
        self._partition_window: list[RankFrame] = []
        self._first_look: tuple[CostModel, tuple[int, ...]] | None = None
        """The first look's costs and split, while a second look runs (``two_look_profile``)."""
        self._look_start = snapshot.frames_done if snapshot is not None else 0
        """The first frame of a look warms up (torch's shape inference on fresh stages): untimed."""
        if self._partitioning and saved_look is not None:
            self._restore_look(saved_look)
        if config.layer_split == "measured" and not has_hook:
            raise ValueError(
                "layer_split: 'measured' re-splits the model's layers, which needs the per-layer hook "
                "(ModelSpec.build_layers and num_layers) in the model factory; add it or use 'even'"
            )

        self.is_reporter = self.topology.rank == 0
        self.choice: MeasuredChoice | None = None
        self._forced = forced_plans or {}
        if self._measures_schedules and not self._partitioning:
            self.choice = MeasuredChoice(
                config,
                is_reporter=self.is_reporter,
                state=saved_choice,
                forced=self._forced,
                num_layers=self._num_layers,
            )
            # Start on the first candidate's placement (or the resumed one): no move at frame 1.
            self.plan = self.choice.next_plan()[1]
        elif self._partitioning and self._measures_schedules:
            # Time the even split on the placement the measured choice starts on: when the split
            # stays, nothing moves after the partition frames (a resumed look goes on there too).
            candidates, torch_plans = candidate_plans(config, num_layers=self._num_layers)
            self.plan = torch_plans.get(candidates[0].name, self.plan) if candidates else self.plan
        elif saved is not None:
            self.plan = _resume_plan(saved, self.plan)

        self._context = StageContext(
            config, self.spec, self.topology.pp_rank, self.groups, self.device, profile=profile
        )
        # A snapshot overwrites every parameter: on resume the model is not initialised (or its
        # weights read) first, where it can be built so (ModelSpec.build_empty_layers).
        self.stages = StageSet.build(
            self._context, self.plan.placement, self.plan.orders, empty=snapshot is not None
        )
        self.scheduler = LrScheduler(LrSchedule.of(config))
        if snapshot is not None:
            checkpoint.load_snapshot(
                snapshot,
                modules=self.stages.modules,
                optimizer=self.stages.optimizer,
                extra=self.extra_states(),
            )
            self.frames_done = self.scheduler.step = snapshot.frames_done
            own = checkpoint.load_rank_state(snapshot, self.topology.rank)
            if own is not None:
                self.scheduler.load_state_dict(own["lr_scheduler"], expected_step=self.frames_done)
                set_rng_state(own["rng"], self.device)
            log.info("resumed from %s: %d frames done", snapshot.path, self.frames_done)
        self.batches: BatchSource = open_batches(
            config,
            self.spec,
            replica=self.topology.dp_rank,
            pin_memory=self.device.type == "cuda",
            state=snapshot.data if snapshot is not None else None,
        )

        self.trace = TraceWriter(config.trace_dir) if config.trace_dir and self.is_reporter else None
        self.board = BoardWriter(config.trace_dir) if config.trace_dir and self.is_reporter else None
        self._dropped_metrics: set[str] = set()
        self.progress = _start_progress(config, self.frames_done) if self.is_reporter else None
        self.result = TrainResult(start_frame=self.frames_done, profile=profile)
        self._frames_on_plan = 0
        self._peaks = PlanPeaks()

    # ---- state the tests and checkpoints read ----------------------------------------------------
    @property
    def modules(self) -> dict[int, nn.Module]:
        return self.stages.modules

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.stages.optimizer

    @property
    def executor(self) -> PipelineExecutor:
        return self.stages.executor

    @property
    def stage_context(self) -> StageContext:
        """What building this rank's stages takes (config, model, groups, device, layer profile)."""
        return self._context

    def extra_states(self) -> dict[str, Any]:
        """Named states saved in every snapshot besides the model and optimizer, and loaded back
        by name on resume (DCP ``Stateful`` objects or state dicts). None yet: the learning-rate
        schedule and RNG travel in each rank's own state and the loader position in the snapshot's
        meta (``save``); this is the place for states that are sharded like the model's."""
        return {}

    @property
    def _measures_schedules(self) -> bool:
        """The hyperframe policy chooses schedules by measurement (``replan_every`` > 0)."""
        return self.config.policy == "hyperframe" and self.config.replan_every > 0

    @property
    def selector(self) -> ScheduleSelector | None:
        return self.choice.selector if self.choice is not None else None

    @property
    def layer_boundaries(self) -> tuple[int, ...] | None:
        """The layer split of the running stages; None = the model's own ``build_stage``."""
        return self.stages.boundaries

    def set_plan(self, plan: FramePlan) -> None:
        """Run ``plan`` from the next frame on (collective: every rank passes the same plan)."""
        if plan.placement != self.stages.placement:
            self.stages = self.stages.moved_to(self._context, plan.placement, plan.orders)
        elif plan.orders != self.plan.orders:
            self.stages.executor.set_orders(plan.orders)
        if plan is not self.plan:
            self._frames_on_plan = 0
        self.plan = plan

    # ---- one frame -------------------------------------------------------------------------------
    def run_frame(self, *, step: bool = True) -> FrameMetrics:
        """Run the next frame; ``step=False`` leaves the frame's gradients unapplied (tests)."""
        config, topology = self.config, self.topology
        frame = self.frames_done
        choice = self.choice
        step_: Step | None = None
        switch_s = predicted = 0.0
        if choice is not None:
            step_, plan = choice.next_plan()
            began = time.perf_counter()
            self.set_plan(plan)
            switch_s = time.perf_counter() - began
            predicted = choice.prediction(self.plan)
        reset_peak_memory(self.device)
        frame_start = time.perf_counter()
        (inputs, targets), data_wait_s = timed(self.batches, frame)
        self.optimizer.zero_grad(set_to_none=True)
        run = self.executor.run_frame(inputs, targets)  # gradients DP-averaged when it returns
        tied = self.spec.tied_parameters
        if tied:
            sum_tied_grads(self.modules, tied, self.groups.pp_group, self.device)
        grad_norm: float | None = None
        lr = self.scheduler.schedule.lr_at(self.scheduler.step)
        if step:
            if config.grad_clip_norm > 0:
                counted, copies = norm_params(self.modules, tied)
                grad_norm = clip_grad_norm(
                    counted, config.grad_clip_norm, self.groups.pp_group, self.device, also_scale=copies
                )
            lr = self.scheduler.apply(self.optimizer)
            self.optimizer.step()
        self.scheduler.advance()
        if self.device.type == "cuda":  # the step's kernels are asynchronous: the frame ends with them
            torch.cuda.synchronize(self.device)
        run.frame_s = time.perf_counter() - frame_start
        self.frames_done = frame + 1
        mine = RankFrame.from_run(
            run,
            frame=self.frames_done,
            rank=topology.rank,
            pp_rank=topology.pp_rank,
            dp_rank=topology.dp_rank,
            peak_memory=peak_memory_bytes(self.device),
            data_wait_s=data_wait_s,
        )
        summary = mine.summary()
        if choice is not None:
            summary = replace(summary, drift=choice.drift(self.plan, mine))
        exchange_began = time.perf_counter()
        summaries = exchange_summaries(summary)
        metrics = metrics_from_summaries(
            self.frames_done,
            summaries,
            samples_per_frame=config.samples_per_frame,
            tokens_per_sample=self.spec.tokens_per_sample,
            loss_terms=config.microbatches_per_frame * config.data,
        )
        replan_due = choice.replan_due(summaries) if choice is not None else False
        need_records = (
            bool(config.trace_dir)
            or (step_ is not None and step_.gather)
            or replan_due
            or (self._partitioning and frame > self._look_start)  # the look's first frame warms up
        )
        ranks: list[RankFrame] = []
        if need_records:
            gathered: list[RankFrame | None] = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, mine)
            ranks = [r for r in gathered if r is not None]
        exchange_s = time.perf_counter() - exchange_began
        replan_s, planner_s = switch_s, 0.0
        if self._partitioning:
            self._partition_window.extend(ranks)
            if self.frames_done >= self._look_start + PARTITION_FRAMES:
                began = time.perf_counter()
                self._repartition()
                replan_s += time.perf_counter() - began
        if choice is not None and step_ is not None:
            began = time.perf_counter()
            outcome = choice.observe(
                step_,
                self.plan,
                metrics.frame_s,
                ranks,
                replan_due,
                lambda: [m.replan_s for m in self.result.metrics],
            )
            replan_s += time.perf_counter() - began
            planner_s = outcome.planner_s
            self._log_events(outcome.events)
        calibrations = self.choice.calibrations if self.choice is not None else {}
        peaks = self._peaks.of(self.plan, calibrations.get(self.plan.placement))
        metrics = replace(
            metrics,
            activation_peak_bytes=peaks.plan_max,
            activation_peak_1f1b_bytes=peaks.one_f_one_b_max,
            predicted_frame_s=predicted,
            schedule=self.plan.schedule or config.policy,
            exploring=bool(step_ and step_.exploring),
            replan_s=replan_s,
            planner_s=planner_s,
            exchange_s=exchange_s,
        )
        self.result.metrics.append(metrics)
        self.result.plans.append(self.plan)
        self._frames_on_plan += 1
        if self.trace is not None:
            self.trace.add_frame(self.frames_done, ranks, metrics)
            if self._frames_on_plan == 2 or self.frames_done == config.frames:
                self.trace.add_gantt(self.frames_done, self.plan, ranks)
        user = self._user_metrics() if self.is_reporter else {}
        if self.board is not None:
            self.board.add_frame(metrics, lr=lr, grad_norm=grad_norm, user=user)
        if self.progress is not None:
            _report(config, metrics, self.result, self.progress, user)
        return metrics

    def _user_metrics(self) -> dict[str, float]:
        """The model's ``frame_metrics`` of this frame, bounded for ``status.progress`` (a warning
        names each dropped metric the first time it is dropped)."""
        if self.spec.frame_metrics is None:
            return {}
        bounded = bounded_metrics(self.spec.frame_metrics(self.frames_done))
        fresh = {name: why for name, why in bounded.dropped.items() if name not in self._dropped_metrics}
        if fresh:
            self._dropped_metrics.update(fresh)
            log.warning(
                "frame %d: frame_metrics: dropped %s",
                self.frames_done,
                "; ".join(f"{name!r}: {why}" for name, why in fresh.items()),
            )
        return bounded.kept

    def _repartition(self) -> None:
        """Re-split the layers by the costs measured in the look that just ended (collective: every
        rank computes the same profile from the same all-gathered records). After a first look
        that moved layers on one stage per rank, the stages move and a second look follows
        (``pipeline.partitioning.two_look_profile``); then the schedules are chosen."""
        placement = self.plan.placement
        even = even_split(self.spec.num_layers, placement.num_stages)
        before = self.stages.boundaries or even
        costs = calibrate(self._partition_window, placement).costs
        self._partition_window = []
        first, self._first_look = self._first_look, None
        profile = LayerProfile.measure(costs, placement, before)
        if first is not None:
            profile = two_look_profile(placement, first, (costs, before)) or self._context.profile or profile
        slowdowns = [round(x, 2) for x in profile.rank_slowdown]
        self._context = replace(self._context, profile=profile)
        self.result.profile = profile
        look = "second look" if first is not None else "first look"
        after = profile.split_for(placement)
        if first is None and second_look_tells(placement, before, after):
            # Moved layers on one stage per rank: measure the new split too before choosing.
            self.stages = self.stages.moved_to(self._context, placement, self.plan.orders)
            self._first_look, self._look_start = (costs, before), self.frames_done
            self._log_events(
                (
                    f"layer split {list(before)} -> {list(after)} on placement "
                    f"{list(placement.stage_to_rank)}, from measured rank slowdowns {slowdowns} "
                    f"({look}; {PARTITION_FRAMES} frames on it separate the first and last "
                    "stages' extra cost from the layers')",
                )
            )
            return
        self._partitioning = False
        plan = self.plan
        if self._measures_schedules:  # the schedules are chosen on the new split
            self.choice = MeasuredChoice(
                self.config, is_reporter=self.is_reporter, forced=self._forced, num_layers=self._num_layers
            )
            plan = self.choice.next_plan()[1]
        target = plan.placement
        after = profile.split_for(target)
        if target == placement and after == before:  # nothing moves: no stage rebuild
            self.stages.executor.set_orders(plan.orders)
        else:
            self.stages = self.stages.moved_to(self._context, target, plan.orders)
        base = even_split(self.spec.num_layers, target.num_stages)
        where = f"on placement {list(target.stage_to_rank)}"
        costs_of = profile.layer_costs
        extras = (
            f"; the first and last layers cost {costs_of[0] / costs_of[1]:.2f}x and "
            f"{costs_of[-1] / costs_of[1]:.2f}x a middle one"
            if first is not None and len(costs_of) > 2
            else ""
        )
        if after == base:
            verb = "kept" if after == before or target != placement else f"back from {list(before)}"
            event = (
                f"layer split {list(after)} {verb} {where}: the measured rank slowdowns {slowdowns}"
                f"{extras} predict no split {SPLIT_MARGIN:.0%} faster than the even one ({look})"
            )
        else:
            event = f"layer split {list(base)} -> {list(after)} {where}, from measured rank slowdowns {slowdowns}{extras} ({look})"
        self.plan, self._frames_on_plan = plan, 0
        self._log_events((event,))

    def _log_events(self, events: tuple[str, ...]) -> None:
        for event in events:
            self.result.events.append(f"frame {self.frames_done}: {event}")
            if self.is_reporter:
                log.info("frame %d: %s", self.frames_done, event)

    # ---- between frames --------------------------------------------------------------------------
    def after_frame(self) -> None:
        """Checkpoint when due (collective)."""
        config, done = self.config, self.frames_done
        due = config.checkpoint_every and done % config.checkpoint_every == 0
        if config.checkpoint_dir and (due or done == config.frames):
            self.save()

    def save(self) -> str:
        """Write the snapshot of the frames done so far (collective); returns its path."""
        config, done = self.config, self.frames_done
        path = str(
            checkpoint.save_snapshot(
                self.snapshot_root,
                frames_done=done,
                global_step=done,
                modules=self.modules,
                optimizer=self.optimizer,
                plan=self._snapshot_plan(),
                config=config.to_dict(),
                data=self.batches.state(),
                rank_state={"lr_scheduler": self.scheduler.state_dict(), "rng": rng_state(self.device)},
                extra=self.extra_states(),
                keep=config.checkpoint_keep,
            )
        )
        self.result.snapshots.append(path)
        return path

    def stop_agreed(self) -> bool:
        """Whether any rank got SIGTERM (collective, at a frame boundary); if so, this frame's
        snapshot is written (unless it already is) and the result is marked preempted."""
        if not agree_to_stop(self.stop.requested, self.device):
            return False
        done = str(checkpoint.snapshot_dir(self.snapshot_root, self.frames_done))
        saved = bool(self.result.snapshots) and self.result.snapshots[-1] == done
        if self.config.checkpoint_dir and not saved:
            self.save()
        self.result.preempted = True
        if self.is_reporter:
            where = f"snapshot {done}" if self.config.checkpoint_dir else "no checkpoint_dir, nothing saved"
            log.warning("stopping on SIGTERM after frame %d (%s)", self.frames_done, where)
        return True

    def _snapshot_plan(self) -> dict[str, Any]:
        """The running plan, with the layer profile its stages were split by (if measured)."""
        plan = self.plan.to_json()
        if self._context.profile is not None:
            plan["layer_profile"] = self._context.profile.to_json()
        if self.choice is not None:
            plan["choice"] = self.choice.to_json()
        if self._partitioning:
            plan["partition"] = self._look_state()
        return plan

    def _look_state(self) -> dict[str, Any]:
        """The layer split's look in progress: where it started, what it gathered, and the first
        look's costs and split during a second look."""
        first = self._first_look
        return {
            "look_start": self._look_start,
            "window": [r.to_json() for r in self._partition_window],
            "first_look": None if first is None else [first[0].to_mapping(), list(first[1])],
        }

    def _restore_look(self, state: dict[str, Any]) -> None:
        self._look_start = int(state["look_start"])
        self._partition_window = [RankFrame.from_json(r) for r in state["window"]]
        first = state["first_look"]
        if first is not None:
            self._first_look = (CostModel.from_mapping(first[0]), tuple(int(x) for x in first[1]))

    def run(self) -> TrainResult:
        """Run the remaining frames of ``config.frames``."""
        try:
            while self.frames_done < self.config.frames:
                self.run_frame()
                self.after_frame()
                if self.frames_done < self.config.frames and self.stop_agreed():
                    break
        finally:
            self.close()
        return self.result

    def close(self) -> None:
        self.batches.close()
        if self.progress is not None:
            self.progress.close()
            self.progress = None
        if self.trace is not None:
            self.trace.close()
            self.trace = None
        if self.board is not None:
            self.board.close()
            self.board = None
        if self.choice is not None:
            self.choice.close()


def _resume_plan(saved: FramePlan, fresh: FramePlan) -> FramePlan:
    # A snapshot's order table is reused only for the same policy, placement and frame size.
    same = (
        saved.policy == fresh.policy
        and saved.placement == fresh.placement
        and saved.num_microbatches == fresh.num_microbatches
    )
    return saved if same else fresh


def train(
    config: TrainConfig,
    *,
    spec: ModelSpec | None = None,
    device: torch.device | None = None,
    stop: StopFlag | None = None,
) -> TrainResult:
    """Run ``config`` on the already initialised default process group; every rank calls it.
    With ``stop`` (set by the SIGTERM handler) the run may end early, ``preempted``."""
    return FrameLoop(config, spec=spec, device=device, stop=stop).run()


def _start_progress(config: TrainConfig, frames_done: int) -> ProgressReporter:
    """Reports (and re-posts at least every 20 s) from before the first frame ends."""
    return ProgressReporter(
        ProgressUpdate(
            frame=frames_done,
            totalFrames=config.frames,
            step=frames_done,
            # Not measured yet: non-finite values are left out of status.progress.
            loss=float("nan"),
            samplesPerSecond=float("nan"),
            etaSeconds=float("nan"),
        )
    )


def _report(
    config: TrainConfig,
    metrics: FrameMetrics,
    result: TrainResult,
    progress: ProgressReporter,
    user: dict[str, float],
) -> None:
    frame_times = [m.frame_s for m in result.metrics]
    recent = frame_times[-5:]
    remaining = config.frames - metrics.frame
    log.info(
        "frame %d: loss %.4f, %.1f samples/s, %.0f tokens/s, bubble %.1f%%, dp wait %.1f%%, data wait %.1f%%, "
        "peak %.1f MiB, "
        "%s %.1f ms (predicted %.1f ms), activation peak %.2f MiB (1F1B %.2f MiB)",
        metrics.frame,
        metrics.loss,
        metrics.samples_per_s,
        metrics.tokens_per_s,
        100 * metrics.bubble_share,
        100 * metrics.comm_wait_share,
        100 * metrics.data_wait_share,
        metrics.peak_memory_bytes / 2**20,
        metrics.schedule,
        1e3 * metrics.frame_s,
        1e3 * metrics.predicted_frame_s,
        metrics.activation_peak_bytes / 2**20,
        metrics.activation_peak_1f1b_bytes / 2**20,
    )
    progress.report(
        ProgressUpdate(
            frame=metrics.frame,
            totalFrames=config.frames,
            step=metrics.frame,
            loss=metrics.loss,
            samplesPerSecond=metrics.samples_per_s,
            etaSeconds=remaining * sum(recent) / len(recent),
            metrics=user,
        )
    )
