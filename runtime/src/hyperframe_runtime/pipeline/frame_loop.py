"""The frame loop: frames of micro-batches, one optimizer step per frame, re-planning between frames.

Per frame, on every rank:

1. the data of this frame and replica (a pure function of the frame index: exact resume);
2. the executor runs the frame's order (forward, backward, DP gradient all-reduce from each stage's
   REDUCE_GRAD point, waited for at the end);
3. AdamW steps;
4. every rank's measurements are all-gathered; global rank 0 writes metrics and the trace and
   reports progress (``hyperframe_runtime.progress``);
5. every ``replan_every`` frames (hyperframe policy) every rank plans the next order from the
   measured per-op costs of all ranks (the same numbers everywhere, so the same plan);
6. every ``checkpoint_every`` frames, and after the last, a DCP snapshot with the plan.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.spec import ModelSpec, load_model_spec
from hyperframe_runtime.pipeline import checkpoint
from hyperframe_runtime.pipeline.executor import PipelineExecutor
from hyperframe_runtime.pipeline.metrics import (
    FrameMetrics,
    RankFrame,
    frame_metrics,
    peak_memory_bytes,
    reset_peak_memory,
)
from hyperframe_runtime.pipeline.planning import (
    FramePlan,
    choose_plan,
    estimate_p2p,
    exploration_plans,
    initial_plan,
    orders_digest,
)
from hyperframe_runtime.pipeline.topology import Topology, build_groups
from hyperframe_runtime.pipeline.trace import TraceWriter
from hyperframe_runtime.progress import ProgressReporter, ProgressUpdate

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


def _resume_plan(saved: FramePlan, fresh: FramePlan) -> FramePlan:
    # A snapshot's order table is reused only for the same policy, placement and frame size.
    same = (
        saved.policy == fresh.policy
        and saved.placement == fresh.placement
        and saved.num_microbatches == fresh.num_microbatches
    )
    return saved if same else fresh


def _replan(config: TrainConfig, plan: FramePlan, window: list[RankFrame]) -> FramePlan:
    samples = [(stage, kind, end - start) for rf in window for stage, kind, _, start, end, _ in rf.records]
    p2p = estimate_p2p(window, plan.placement)
    new = choose_plan(config, plan.placement, samples, replans=plan.replans + 1, p2p=p2p)
    digests: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(digests, orders_digest(new.orders))
    if len(set(digests)) != 1:
        raise RuntimeError(
            f"re-planning diverged across ranks (order digests {digests}); planner is not deterministic"
        )
    return new


class FrameLoop:
    """One rank's training state (stages, optimizer, executor, plan) and the frame loop over it.

    Construction is collective (process groups, resume from the newest snapshot); so is every
    :meth:`run_frame`. :func:`train` is the whole loop; tests drive frames one by one.
    """

    def __init__(
        self, config: TrainConfig, *, spec: ModelSpec | None = None, device: torch.device | None = None
    ) -> None:
        config.check_world_size(dist.get_world_size())
        self.config = config
        self.device = device or torch.device("cpu")
        self.spec = spec or load_model_spec(config)
        self.topology = Topology(dist.get_rank(), config.pipeline, config.data)
        groups = build_groups(self.topology)
        torch.manual_seed(config.seed)

        fresh = initial_plan(config)
        self.plan = fresh
        stages = self.plan.placement.stages_of(self.topology.pp_rank)
        num_stages = self.plan.placement.num_stages
        self.modules: dict[int, nn.Module] = {
            s: self.spec.build_stage(s, num_stages).to(self.device) for s in stages
        }
        self.optimizer = torch.optim.AdamW(
            [p for s in stages for p in self.modules[s].parameters()], lr=config.lr
        )
        self.frames_done = 0
        if config.checkpoint_dir:
            snapshot = checkpoint.resume_snapshot(config.checkpoint_dir)
            if snapshot is not None:
                checkpoint.load_snapshot(snapshot, modules=self.modules, optimizer=self.optimizer)
                self.frames_done = snapshot.frames_done
                self.plan = _resume_plan(FramePlan.from_json(snapshot.plan), self.plan)
                log.info("resumed from %s: %d frames done", snapshot.path, self.frames_done)
        self.executor = PipelineExecutor(
            stage_modules=self.modules,
            num_stages=num_stages,
            num_microbatches=config.microbatches_per_frame,
            loss_fn=self.spec.loss_fn,
            pp_group=groups.pp_group,
            dp_group=groups.dp_group,
            dp_size=config.data,
            device=self.device,
            orders=self.plan.orders,
        )
        self.is_reporter = self.topology.rank == 0
        self.trace = TraceWriter(config.trace_dir) if config.trace_dir and self.is_reporter else None
        self.progress = _start_progress(config, self.frames_done) if self.is_reporter else None
        self.result = TrainResult(start_frame=self.frames_done)
        self._explore = exploration_plans(config, fresh) if self.plan.replans == 0 else ()
        self._window: list[RankFrame] = []
        self._frames_on_plan = 0

    def set_plan(self, plan: FramePlan) -> None:
        """Run ``plan`` from the next frame on (collective: every rank passes the same plan)."""
        self.executor.set_orders(plan.orders)
        self.plan = plan
        self._frames_on_plan = 0

    def run_frame(self, *, step: bool = True) -> FrameMetrics:
        """Run the next frame; ``step=False`` leaves the frame's gradients unapplied (tests)."""
        config, topology = self.config, self.topology
        frame = self.frames_done
        if self._explore and self.plan.replans == 0:
            explore = self._explore[frame % len(self._explore)]
            if explore.orders != self.plan.orders:
                self.set_plan(explore)
        samples = config.microbatches_per_frame * config.micro_batch_size
        inputs, targets = self.spec.make_batch(frame, topology.dp_rank, samples)
        reset_peak_memory(self.device)
        frame_start = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        run = self.executor.run_frame(inputs, targets)
        if step:
            self.optimizer.step()
        run.frame_s = time.perf_counter() - frame_start
        self.frames_done = frame + 1
        mine = RankFrame.from_run(
            run,
            frame=self.frames_done,
            rank=topology.rank,
            pp_rank=topology.pp_rank,
            dp_rank=topology.dp_rank,
            peak_memory=peak_memory_bytes(self.device),
        )
        gathered: list[RankFrame | None] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, mine)
        ranks = [r for r in gathered if r is not None]
        metrics = frame_metrics(
            self.frames_done,
            ranks,
            samples_per_frame=config.samples_per_frame,
            tokens_per_sample=self.spec.tokens_per_sample,
            loss_terms=config.microbatches_per_frame * config.data,
        )
        self.result.metrics.append(metrics)
        self.result.plans.append(self.plan)
        self._frames_on_plan += 1
        if self.trace is not None:
            self.trace.add_frame(self.frames_done, ranks, metrics)
            if self._frames_on_plan == 2 or self.frames_done == config.frames:
                self.trace.add_gantt(self.frames_done, self.plan, ranks)
        if self.progress is not None:
            _report(config, metrics, self.result, self.progress)
        self._window.extend(ranks)
        return metrics

    def replan(self) -> FramePlan:
        """Plan from the per-op costs measured on every rank since the last re-plan (collective)."""
        self.set_plan(_replan(self.config, self.plan, self._window))
        self._window = []
        if self.is_reporter:
            log.info(
                "frame %d: re-planned from measured costs, predicted makespan %.4fs",
                self.frames_done,
                self.plan.predicted_makespan,
            )
        return self.plan

    def after_frame(self) -> None:
        """Re-plan and checkpoint when due (collective)."""
        config, done = self.config, self.frames_done
        if (
            config.policy == "hyperframe"
            and config.replan_every
            and done % config.replan_every == 0
            and done < config.frames
        ):
            self.replan()
        due = config.checkpoint_every and done % config.checkpoint_every == 0
        if config.checkpoint_dir and (due or done == config.frames):
            path = checkpoint.save_snapshot(
                config.checkpoint_dir,
                frames_done=done,
                global_step=done,
                modules=self.modules,
                optimizer=self.optimizer,
                plan=self.plan.to_json(),
                config=config.to_dict(),
            )
            self.result.snapshots.append(str(path))

    def run(self) -> TrainResult:
        """Run the remaining frames of ``config.frames``."""
        try:
            while self.frames_done < self.config.frames:
                self.run_frame()
                self.after_frame()
        finally:
            self.close()
        return self.result

    def close(self) -> None:
        if self.progress is not None:
            self.progress.close()
            self.progress = None
        if self.trace is not None:
            self.trace.close()
            self.trace = None


def train(
    config: TrainConfig, *, spec: ModelSpec | None = None, device: torch.device | None = None
) -> TrainResult:
    """Run ``config`` on the already initialised default process group; every rank calls it."""
    return FrameLoop(config, spec=spec, device=device).run()


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
    config: TrainConfig, metrics: FrameMetrics, result: TrainResult, progress: ProgressReporter
) -> None:
    frame_times = [m.frame_s for m in result.metrics]
    recent = frame_times[-5:]
    remaining = config.frames - metrics.frame
    log.info(
        "frame %d: loss %.4f, %.1f samples/s, %.0f tokens/s, bubble %.1f%%, dp wait %.1f%%, peak %.1f MiB",
        metrics.frame,
        metrics.loss,
        metrics.samples_per_s,
        metrics.tokens_per_s,
        100 * metrics.bubble_share,
        100 * metrics.comm_wait_share,
        metrics.peak_memory_bytes / 2**20,
    )
    progress.report(
        ProgressUpdate(
            frame=metrics.frame,
            totalFrames=config.frames,
            step=metrics.frame,
            loss=metrics.loss,
            samplesPerSecond=metrics.samples_per_s,
            etaSeconds=remaining * sum(recent) / len(recent),
        )
    )
