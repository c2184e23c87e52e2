"""Observability files written by global rank 0 into ``trace_dir``.

- ``trace.json``: a Chrome/Perfetto trace (open it in https://ui.perfetto.dev or chrome://tracing).
  One process per global rank; thread "compute" holds every F/I/W/B op, thread "wait" the time the
  rank sat waiting before each op, thread "dp all-reduce" the exposed data-parallel wait at the
  frame end. Each op's args carry frame, stage, micro-batch and wait in milliseconds.
- ``metrics.jsonl``: one :class:`~hyperframe_runtime.pipeline.metrics.FrameMetrics` per line.
- ``ops.jsonl``: per frame, per rank, every op's exec and wait seconds (the raw measurements).
- ``plan-vs-actual-frame-<k>.svg``: a Gantt picture of the planned order replayed on the
  frame's measured costs above what actually ran (see ``gantt.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from hyperframe_runtime.pipeline.metrics import FrameMetrics, RankFrame

__all__ = ["TraceWriter"]

_MIN_WAIT_S: Final = 1e-5
_TID_COMPUTE: Final = 0
_TID_WAIT: Final = 1
_TID_DP: Final = 2


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
            self._ops.write(
                json.dumps(
                    {
                        "frame": frame,
                        "rank": rank.rank,
                        "records": rank.records,
                        "dp_wait_s": rank.dp_wait_s,
                        "frame_s": rank.frame_s,
                    }
                )
                + "\n"
            )
        self._metrics.write(json.dumps(metrics.to_json()) + "\n")
        self._metrics.flush()
        self._ops.flush()

    def _name_process(self, rank: RankFrame) -> None:
        if rank.rank in self._named:
            return
        self._named.add(rank.rank)
        label = f"rank {rank.rank} (pipeline {rank.pp_rank}, replica {rank.dp_rank})"
        self._events.append({"name": "process_name", "ph": "M", "pid": rank.rank, "args": {"name": label}})
        self._events.append(
            {"name": "process_sort_index", "ph": "M", "pid": rank.rank, "args": {"sort_index": rank.rank}}
        )
        for tid, name in ((_TID_COMPUTE, "compute"), (_TID_WAIT, "wait"), (_TID_DP, "dp all-reduce")):
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
