"""The runtime's ``trace.json``: Chrome trace events written one line at a time, read back tolerantly.

The file is the Chrome trace "JSON array" format: ``[`` on the first line, then one event per
line, separated by commas. The writer flushes after every frame and writes the closing ``]`` only
when the run ends; Perfetto and chrome://tracing accept a file without it, and :func:`read_events`
reads one whose last line was cut mid-write (a killed run), keeping every complete event before
it. Each frame ends with a ``frame end`` instant event (``args.frame``), so a reader knows which
frames are complete.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final

from hyperframe_runtime.schedule.ir import Action, OpKind, ScheduleError
from hyperframe_runtime.schedule.simulate import Span

__all__ = ["FRAME_END", "TraceStream", "complete_frames", "frame_spans", "read_events"]

FRAME_END: Final = "frame end"
"""Name of the instant event that closes each frame's events."""
_COMPUTE_KINDS: Final = frozenset(kind.value for kind in (OpKind.F, OpKind.I, OpKind.W, OpKind.B))


class TraceStream:
    """Appends events to a new trace file; :meth:`flush` makes everything so far durable."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] = path.open("w", encoding="utf-8")
        self._file.write("[")
        self._count = 0

    def emit(self, event: Mapping[str, Any]) -> None:
        self._file.write(("\n" if self._count == 0 else ",\n") + json.dumps(event, separators=(",", ":")))
        self._count += 1

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if self._file.closed:
            return
        self._file.write("\n]\n")
        self._file.close()


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """Every complete event of a trace file: a closed or unclosed array (one event per line, as
    :class:`TraceStream` writes it) or a ``{"traceEvents": [...]}`` object. A last line cut
    mid-write is dropped; a bad line before it is an error naming the line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScheduleError(f"{path}: cannot read: {exc}") from exc
    head = text.lstrip()[:1]
    if head == "{":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScheduleError(f"{path}: not a JSON trace object: {exc}") from exc
        events = data.get("traceEvents") if isinstance(data, dict) else None
        if not isinstance(events, list):
            raise ScheduleError(f"{path}: expected a traceEvents list")
        return [e for e in events if isinstance(e, dict)]
    if head != "[":
        raise ScheduleError(f"{path}: not a Chrome trace (expected '[' or '{{' at the start)")
    lines = text.lstrip()[1:].splitlines()
    out: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        item = line.strip().rstrip(",").strip()
        if item in ("", "]"):
            continue
        try:
            event = json.loads(item)
        except json.JSONDecodeError as exc:
            if number == len(lines):
                break  # the run was killed while writing this line
            raise ScheduleError(f"{path}: line {number}: not a JSON event: {exc}") from exc
        if isinstance(event, dict):
            out.append(event)
    return out


def complete_frames(events: Sequence[Mapping[str, Any]]) -> list[int]:
    """The frames whose ``frame end`` event is in ``events``, in order."""
    return sorted(int(e["args"]["frame"]) for e in events if e.get("name") == FRAME_END and "args" in e)


def frame_spans(events: Sequence[Mapping[str, Any]], frame: int) -> tuple[list[Span], int]:
    """The compute ops of ``frame`` as spans (seconds from the frame's first op; one row per trace
    process, i.e. global rank) and the number of rows."""
    ops = [
        e
        for e in events
        if e.get("ph") == "X" and e.get("cat") in _COMPUTE_KINDS and e.get("args", {}).get("frame") == frame
    ]
    if not ops:
        raise ScheduleError(f"frame {frame}: no compute ops in the trace")
    origin = min(float(e["ts"]) for e in ops)
    spans = [
        Span(
            int(e["pid"]),
            (float(e["ts"]) - origin) / 1e6,
            (float(e["ts"]) + float(e["dur"]) - origin) / 1e6,
            Action(int(e["args"]["stage"]), OpKind(e["cat"]), int(e["args"]["microbatch"])),
            int(e["args"]["stage"]),
        )
        for e in ops
    ]
    return spans, 1 + max(span.rank for span in spans)
