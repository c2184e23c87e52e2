"""Observability files written by global rank 0 into ``trace_dir``.

- ``trace.json``: a Chrome/Perfetto trace (open it in https://ui.perfetto.dev or chrome://tracing).
  One process per global rank; thread "compute" holds every F/I/W/B op, thread "wait" the time the
  rank sat waiting before each op, thread "dp all-reduce" the exposed data-parallel wait at the
  frame end, thread "dp all-reduce in flight" each stage's gradient all-reduce from its
  REDUCE_GRAD point until it was seen complete (so its overlap with the remaining compute shows).
  Each op's args carry frame, stage, micro-batch and wait in milliseconds.
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

__all__ = ["TraceWriter"]

_MIN_WAIT_S: Final = 1e-5
_TID_COMPUTE: Final = 0
_TID_WAIT: Final = 1
_TID_DP: Final = 2
_TID_REDUCE: Final = 3


class TraceWriter:
    """Accumulates frames and (re)writes the files in ``directory``."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._events: list[dict[str, Any]] = []
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
                self._events.append(
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
                    self._events.append(
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
                self._events.append(
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
                self._events.append(
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
        self._metrics.write(json.dumps(metrics.to_json()) + "\n")
        self._metrics.flush()
        self._ops.flush()

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
        self._events.append({"name": "process_name", "ph": "M", "pid": rank.rank, "args": {"name": label}})
        self._events.append(
            {"name": "process_sort_index", "ph": "M", "pid": rank.rank, "args": {"sort_index": rank.rank}}
        )
        threads = (
            (_TID_COMPUTE, "compute"),
            (_TID_WAIT, "wait"),
            (_TID_DP, "dp all-reduce"),
            (_TID_REDUCE, "dp all-reduce in flight"),
        )
        for tid, name in threads:
            self._events.append(
                {"name": "thread_name", "ph": "M", "pid": rank.rank, "tid": tid, "args": {"name": name}}
            )

    def write(self) -> Path:
        """Write ``trace.json`` with every frame so far; returns its path."""
        path = self.directory / "trace.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps({"traceEvents": self._events, "displayTimeUnit": "ms"}), encoding="utf-8")
        tmp.replace(path)
        return path

    def close(self) -> None:
        self.write()
        self._metrics.close()
        self._ops.close()


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
