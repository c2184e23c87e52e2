"""The executor: one frame of a planned per-rank order on torch.distributed.pipelining.

Every policy (the HyperFrame planner and torch's GPipe, 1F1B, Interleaved1F1B and ZBV orders) runs
through this one path: the compute-only order is lowered by torch (sends, receives, REDUCE_GRAD)
and run by ``_PipelineScheduleRuntime`` (behind ``torch_adapter``). The executor adds:

- timing of every op this rank runs (exec time, and the wait before it: the time since the rank's
  previous op ended, i.e. blocked on a neighbour's activation or gradient); on GPU with CUDA
  events read once at the frame end, never a synchronisation per op;
- the data-parallel gradient all-reduce of each stage (``pipeline.grad_sync``: bounded buckets),
  started asynchronously at that stage's REDUCE_GRAD point (after its last backward of the
  frame) so that it overlaps with the other stages' remaining work, and waited for only at the
  frame end;
- bf16 autocast (``TrainConfig.precision``; the model keeps LayerNorm and the loss in fp32);
- the activation bytes of one micro-batch of each stage, measured on the first forward of each
  stage after the stages are built (``pipeline.activation_probe``), for ``costs.activation``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from hyperframe_runtime.pipeline.activation_probe import ActivationProbe
from hyperframe_runtime.pipeline.grad_sync import GradReducer
from hyperframe_runtime.pipeline.torch_adapter import RuntimeSchedule, timed_stage
from hyperframe_runtime.schedule.ir import OpKind, Orders

__all__ = ["FrameRun", "GradReducer", "OpRecord", "PipelineExecutor"]


@dataclass(frozen=True, slots=True)
class OpRecord:
    """One op this rank ran, in seconds since the frame started on this rank."""

    stage: int
    kind: OpKind
    microbatch: int
    start: float
    end: float
    wait: float
    """Seconds between this rank's previous op (or the frame start) and this op's start."""

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def name(self) -> str:
        return f"{self.stage}{self.kind.value}{self.microbatch}"


@dataclass(slots=True)
class FrameRun:
    """What one rank measured while running one frame."""

    records: list[OpRecord]
    losses: list[float]
    """Per-micro-batch losses, on the rank holding the last stage; empty elsewhere."""
    wall_start: float
    """``time.time()`` at the frame start (aligns the ranks' records in a trace)."""
    pipeline_s: float
    """Seconds from the frame start until the rank's pipeline program finished."""
    dp_wait_s: float
    """Seconds blocked on the data-parallel all-reduce after the pipeline program."""
    reduces: list[tuple[int, float, float]] = field(default_factory=list)
    """``(stage, start, end)`` of each stage's DP all-reduce, seconds from the frame start: started
    at the stage's REDUCE_GRAD point, ended when first seen complete (checked after every op)."""
    frame_s: float = 0.0
    """Seconds for the whole frame on this rank (set by the frame loop after the optimizer step)."""
    activation_bytes: dict[int, int] = field(default_factory=dict)
    """Stage -> activation bytes one micro-batch holds until its backward (measured once per
    stage build, see ``pipeline.activation_probe``; empty until then)."""


def _event() -> Any:
    return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]


class _Recorder:
    """Collects OpRecords of one frame.

    On CPU an op's times are read from the host clock around it. On GPU the host clock says only
    when an op was issued, so each op records a pair of CUDA events on the compute stream instead,
    and :meth:`finish` reads them all after one synchronisation at the frame end: no op waits
    for the device before the next is issued.
    """

    def __init__(self, device: torch.device) -> None:
        self._cuda = device.type == "cuda"
        self._device = device
        self.records: list[OpRecord] = []
        self.t0 = 0.0
        self.last_end = 0.0
        self._origin: Any = None
        self._events: list[tuple[int, OpKind, int, Any, Any]] = []
        self.after_op: Callable[[], None] = lambda: None
        """Called after every op on CPU (the gradient reducer stamps finished all-reduces)."""
        self.probe: ActivationProbe | None = None
        """Measures each stage's first forward; None once all are measured (no per-op cost)."""

    def reset(self) -> None:
        self.records = []
        self._events = []
        self.t0 = time.perf_counter()
        self.last_end = 0.0
        if self._cuda:
            self._origin = _event()
            self._origin.record(torch.cuda.current_stream(self._device))

    def now(self) -> float:
        """Seconds since the frame start (host clock)."""
        return time.perf_counter() - self.t0

    def run(self, stage: int, kind: OpKind, microbatch: int, fn: Callable[[], Any]) -> Any:
        probe = self.probe
        if probe is not None and kind is OpKind.F and probe.wants(stage):
            fn = functools.partial(probe.measure, stage, fn)
        if self._cuda:
            stream = torch.cuda.current_stream(self._device)
            begin, end_event = _event(), _event()
            begin.record(stream)
            result = fn()
            end_event.record(stream)
            self._events.append((stage, kind, microbatch, begin, end_event))
            return result
        start = self.now()
        result = fn()
        end = self.now()
        self.records.append(OpRecord(stage, kind, microbatch, start, end, max(0.0, start - self.last_end)))
        self.last_end = end
        self.after_op()
        return result

    def extend_last(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` (the loss after a last-stage F) and count its time in the previous op."""
        result = fn() if self.probe is None else self.probe.measure_loss(fn)
        if self._cuda:
            if self._events:
                stage, kind, mb, begin, _ = self._events[-1]
                end_event = _event()
                end_event.record(torch.cuda.current_stream(self._device))
                self._events[-1] = (stage, kind, mb, begin, end_event)
            return result
        if not self.records:  # torch's shape inference calls the loss before any op runs
            return result
        end = self.now()
        last = self.records[-1]
        self.records[-1] = OpRecord(last.stage, last.kind, last.microbatch, last.start, end, last.wait)
        self.last_end = end
        return result

    def finish(self) -> None:
        """Turn the frame's CUDA events into records (one synchronisation); no-op on CPU."""
        if not self._cuda or not self._events:
            return
        self._events[-1][4].synchronize()
        last_end = 0.0
        for stage, kind, mb, begin, end_event in self._events:
            start = self._origin.elapsed_time(begin) / 1e3
            end = self._origin.elapsed_time(end_event) / 1e3
            self.records.append(OpRecord(stage, kind, mb, start, end, max(0.0, start - last_end)))
            last_end = end
        self._events = []


class _Autocast(nn.Module):
    """Runs the wrapped stage under bf16 autocast (the model keeps LayerNorm and loss in fp32)."""

    def __init__(self, inner: nn.Module, device_type: str) -> None:
        super().__init__()
        self.inner = inner
        self.device_type = device_type

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        with torch.autocast(device_type=self.device_type, dtype=torch.bfloat16):
            return self.inner(*args, **kwargs)


class PipelineExecutor:
    """Runs frames of this rank's stages under a per-rank order (replaceable between frames)."""

    def __init__(
        self,
        *,
        stage_modules: Mapping[int, nn.Module],
        num_stages: int,
        num_microbatches: int,
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        pp_group: dist.ProcessGroup,
        dp_group: dist.ProcessGroup | None,
        dp_size: int,
        device: torch.device,
        orders: Orders,
        bf16: bool | None = None,
    ) -> None:
        """``bf16``: run the stages under bf16 autocast; None = on a CUDA device."""
        self.device = device
        autocast = device.type == "cuda" if bf16 is None else bf16
        self.pp_rank = dist.get_rank(pp_group)
        self._recorder = _Recorder(device)
        self._probe = ActivationProbe(stage_modules, last_stage=num_stages - 1)
        self._recorder.probe = self._probe
        self.reducer = GradReducer(
            stage_modules, num_microbatches, dp_group, dp_size, clock=self._recorder.now
        )
        self._recorder.after_op = self.reducer.poll
        stages = [
            timed_stage(
                self._recorder.run,
                _Autocast(module, device.type) if autocast else module,
                stage_index,
                num_stages,
                device,
                group=pp_group,
            )
            for stage_index, module in sorted(stage_modules.items())
        ]
        self.holds_first = 0 in stage_modules
        self.holds_last = num_stages - 1 in stage_modules

        def timed_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            loss: torch.Tensor = self._recorder.extend_last(lambda: loss_fn(output, target))
            return loss

        self._schedule = RuntimeSchedule(stages, num_microbatches, timed_loss, self.reducer.reduce)
        self.orders: Orders = {}
        self.set_orders(orders)

    def set_orders(self, orders: Orders) -> None:
        """Use ``orders`` from the next frame on (every pipeline rank must switch together)."""
        self._schedule.load_orders(orders)
        self.orders = {rank: list(actions) for rank, actions in orders.items()}

    @property
    def activation_bytes(self) -> dict[int, int]:
        """Stage -> measured activation bytes per micro-batch (after the first frame)."""
        return dict(self._probe.bytes)

    def lowered_program(self) -> list[str]:
        """This rank's lowered program (compute, SEND/RECV, REDUCE_GRAD), for debugging."""
        return self._schedule.lowered_program(self.pp_rank)

    def run_frame(self, inputs: torch.Tensor, targets: torch.Tensor) -> FrameRun:
        """Run every micro-batch of the frame (forward, backward, DP gradient reduce).

        ``inputs``/``targets`` hold the whole frame batch of this data-parallel replica; they are
        split into micro-batches along dim 0. Gradients are left in ``.grad``, averaged over the
        frame and the replicas, ready for the optimizer step.
        """
        wall_start = time.time()
        self._recorder.reset()
        losses: list[torch.Tensor] = []
        args = (inputs.to(self.device),) if self.holds_first else ()
        target = targets.to(self.device) if self.holds_last else None
        if self._recorder.probe is not None:
            self._probe.frame_inputs((*args, target))
        self._schedule.step(*args, target=target, losses=losses)
        pipeline_s = self._recorder.now()
        dp_wait_s = self.reducer.finish()
        self._recorder.finish()
        if self._probe.done:
            self._recorder.probe = None
        return FrameRun(
            records=list(self._recorder.records),
            reduces=list(self.reducer.spans),
            losses=[float(loss.detach()) for loss in losses],
            wall_start=wall_start,
            pipeline_s=pipeline_s,
            dp_wait_s=dp_wait_s,
            activation_bytes=self.activation_bytes,
        )
