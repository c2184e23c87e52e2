"""Observability files written by global rank 0 into ``trace_dir``.

- ``trace.json``: a Chrome/Perfetto trace (open it in https://ui.perfetto.dev or chrome://tracing),
  appended and flushed every frame (``schedule.tracefile``), so a killed run keeps every frame up
  to its last; ``hyperframe-sched trace`` draws any frame of it. A run that finds a
  ``trace.json`` from an earlier run renames that one ``trace.<k>.json`` first (the first free k).
  One process per global rank; thread "compute" holds every F/I/W/B op, thread "wait" the time the
  rank sat waiting before each op, thread "dp all-reduce" the exposed data-parallel wait at the
  frame end, thread "dp all-reduce in flight" each stage's gradient all-reduce from its
  REDUCE_GRAD point until it was seen complete (so its overlap with the remaining compute shows).
  Each op's args carry frame, stage, micro-batch and wait in milliseconds; a ``frame end``
  instant event closes each frame.
- ``metrics.jsonl``: one :class:`~hyperframe_runtime.pipeline.metrics.FrameMetrics` per line
  (measured ``frame_s`` next to the cost model's ``predicted_frame_s``, the schedule, re-plan cost).
- ``ops.jsonl``: per frame, per rank, every op's exec and wait seconds (the raw measurements).
- ``plan-vs-actual-frame-<k>.svg``: a Gantt picture (``schedule.gantt``) of the planned order
  replayed by the simulator on frame k's measured op costs, above what replica 0 actually ran.
  Written for the second frame of every plan (the first includes warm-up) and the last frame.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from hyperframe_runtime.pipeline.metrics import FrameMetrics, RankFrame
from hyperframe_runtime.pipeline.planning import FramePlan, costs_from_samples
from hyperframe_runtime.schedule.gantt import gantt_svg
from hyperframe_runtime.schedule.ir import Action, OpKind
from hyperframe_runtime.schedule.simulate import Span, simulate
from hyperframe_runtime.schedule.tracefile import FRAME_END, TraceStream

__all__ = ["TraceWriter"]

_MIN_WAIT_S: Final = 1e-5
_TID_COMPUTE: Final = 0
_TID_WAIT: Final = 1
_TID_DP: Final = 2
_TID_REDUCE: Final = 3


class TraceWriter:
    """Appends each frame to the files in ``directory``, flushed before :meth:`add_frame` returns."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._events = TraceStream(_fresh_trace_path(self.directory))
        self._origin: float | None = None
        self._named: set[int] = set()
        # A resumed run appends to the files of the interrupted one.
        self._metrics = (self.directory / "metrics.jsonl").open("a", encoding="utf-8")
        self._ops = (self.directory / "ops.jsonl").open("a", encoding="utf-8")

    def add_frame(self, frame: int, ranks: Sequence[RankFrame], metrics: FrameMetrics) -> None:
        if self._origin is None:
            self._origin = min(r.wall_start for r in ranks)
        for rank in ranks:
            self._name_process(rank)
            base = (rank.wall_start - self._origin) * 1e6
            for stage, kind, mb, start, end, wait in rank.records:
                args = {"frame": frame, "stage": stage, "microbatch": mb, "wait_ms": round(wait * 1e3, 3)}
                self._events.emit(
                    _slice(
                        f"{stage}{kind}{mb}",
                        rank.rank,
                        _TID_COMPUTE,
                        base + start * 1e6,
                        (end - start) * 1e6,
                        args,
                        kind,
                    )
                )
                if wait > _MIN_WAIT_S:
                    self._events.emit(
                        _slice(
                            "wait",
                            rank.rank,
                            _TID_WAIT,
                            base + (start - wait) * 1e6,
                            wait * 1e6,
                            {"before": f"{stage}{kind}{mb}"},
                            "wait",
                        )
                    )
            if rank.dp_wait_s > _MIN_WAIT_S:
                self._events.emit(
                    _slice(
                        "dp all-reduce wait",
                        rank.rank,
                        _TID_DP,
                        base + rank.pipeline_s * 1e6,
                        rank.dp_wait_s * 1e6,
                        {"frame": frame},
                        "dp",
                    )
                )
            for stage, start, end in rank.reduces:
                self._events.emit(
                    _slice(
                        f"all-reduce stage {stage}",
                        rank.rank,
                        _TID_REDUCE,
                        base + start * 1e6,
                        (end - start) * 1e6,
                        {"frame": frame, "stage": stage},
                        "dp",
                    )
                )
            self._ops.write(
                json.dumps(
                    {
                        "frame": frame,
                        "rank": rank.rank,
                        "records": rank.records,
                        "reduces": rank.reduces,
                        "activation_bytes": rank.activation_bytes,
                        "dp_wait_s": rank.dp_wait_s,
                        "frame_s": rank.frame_s,
                    }
                )
                + "\n"
            )
        self._events.emit(
            {
                "name": FRAME_END,
                "ph": "i",
                "s": "g",
                "pid": 0,
                "tid": 0,
                "ts": _end_ts(ranks, self._origin),
                "args": {"frame": frame},
            }
        )
        # The trace first: a frame in metrics.jsonl is always complete in trace.json.
        self._events.flush()
        self._ops.flush()
        self._metrics.write(json.dumps(metrics.to_json()) + "\n")
        self._metrics.flush()

    def add_gantt(self, frame: int, plan: FramePlan, ranks: Sequence[RankFrame]) -> Path:
        """Write ``plan-vs-actual-frame-<frame>.svg``: the plan replayed on this frame's measured
        op costs (top) and what replica 0's ranks actually ran (bottom), on one time scale."""
        replica = [r for r in ranks if r.dp_rank == 0]
        origin = min(r.wall_start for r in replica)
        actual = [
            Span(
                r.pp_rank,
                r.wall_start - origin + start,
                r.wall_start - origin + end,
                Action(stage, OpKind(kind), mb),
                stage,
            )
            for r in replica
            for stage, kind, mb, start, end, _ in r.records
        ]
        samples = [(stage, kind, end - start) for r in replica for stage, kind, _, start, end, _ in r.records]
        planned = simulate(
            plan.orders, plan.placement, costs_from_samples(samples, plan.placement), plan.num_microbatches
        )
        actual_end = max((span.end for span in actual), default=0.0)
        scale = max(planned.makespan, actual_end)
        top = gantt_svg(
            planned.spans,
            plan.placement.num_ranks,
            title=f"frame {frame}: planned order on measured costs ({plan.policy})",
            makespan=scale,
        )
        bottom = gantt_svg(
            actual, plan.placement.num_ranks, title=f"frame {frame}: actual (replica 0)", makespan=scale
        )
        path = self.directory / f"plan-vs-actual-frame-{frame}.svg"
        path.write_text(_stack_svgs(top, bottom), encoding="utf-8")
        return path

    def _name_process(self, rank: RankFrame) -> None:
        if rank.rank in self._named:
            return
        self._named.add(rank.rank)
        label = f"rank {rank.rank} (pipeline {rank.pp_rank}, replica {rank.dp_rank})"
        self._events.emit({"name": "process_name", "ph": "M", "pid": rank.rank, "args": {"name": label}})
        self._events.emit(
            {"name": "process_sort_index", "ph": "M", "pid": rank.rank, "args": {"sort_index": rank.rank}}
        )
        threads = (
            (_TID_COMPUTE, "compute"),
            (_TID_WAIT, "wait"),
            (_TID_DP, "dp all-reduce"),
            (_TID_REDUCE, "dp all-reduce in flight"),
        )
        for tid, name in threads:
            self._events.emit(
                {"name": "thread_name", "ph": "M", "pid": rank.rank, "tid": tid, "args": {"name": name}}
            )

    @property
    def trace_path(self) -> Path:
        return self._events.path

    def close(self) -> None:
        """Close ``trace.json`` (its closing bracket) and the JSON-lines files."""
        self._events.close()
        self._metrics.close()
        self._ops.close()


def _fresh_trace_path(directory: Path) -> Path:
    """``trace.json``, after renaming an earlier run's to ``trace.<k>.json`` (first free k)."""
    path = directory / "trace.json"
    if path.exists():
        k = 1
        while (directory / f"trace.{k}.json").exists():
            k += 1
        path.rename(directory / f"trace.{k}.json")
    return path


def _end_ts(ranks: Sequence[RankFrame], origin: float | None) -> float:
    """Microseconds from the trace origin to the end of the frame's slowest rank (0 without ranks)."""
    if not ranks or origin is None:
        return 0.0
    return round(max((r.wall_start - origin + r.frame_s) * 1e6 for r in ranks), 3)


def _stack_svgs(top: str, bottom: str) -> str:
    """One SVG with ``top`` above ``bottom`` (nested <svg> elements keep their own coordinates)."""

    def size(svg: str) -> tuple[float, float]:
        head = svg[: svg.index(">")]
        width = float(head.split('width="', 1)[1].split('"', 1)[0])
        height = float(head.split('height="', 1)[1].split('"', 1)[0])
        return width, height

    (w1, h1), (w2, h2) = size(top), size(bottom)
    nested_bottom = bottom.replace("<svg ", f'<svg y="{h1}" ', 1)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{max(w1, w2)}" height="{h1 + h2}">\n'
        f"{top}{nested_bottom}</svg>\n"
    )


_COLORS: Final[dict[str, str]] = {
    "F": "thread_state_running",
    "I": "rail_response",
    "B": "rail_response",
    "W": "rail_load",
    "wait": "grey",
    "dp": "terrible",
}


def _slice(
    name: str, pid: int, tid: int, ts: float, dur: float, args: dict[str, Any], kind: str
) -> dict[str, Any]:
    return {
        "name": name,
        "cat": kind,
        "ph": "X",
        "pid": pid,
        "tid": tid,
        "ts": round(ts, 3),
        "dur": round(max(dur, 0.0), 3),
        "args": args,
        "cname": _COLORS.get(kind, "generic_work"),
    }
