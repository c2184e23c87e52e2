"""trace.json as the runtime streams it: read back closed, unclosed, and cut mid-line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hyperframe_runtime.schedule.ir import ScheduleError
from hyperframe_runtime.schedule.tracefile import FRAME_END, TraceStream, complete_frames, read_events


def _stream(path: Path, frames: int) -> TraceStream:
    stream = TraceStream(path)
    for frame in range(1, frames + 1):
        stream.emit(
            {
                "name": "0F0",
                "ph": "X",
                "cat": "F",
                "pid": 0,
                "tid": 0,
                "ts": frame,
                "dur": 1,
                "args": {"frame": frame, "stage": 0, "microbatch": 0},
            }
        )
        stream.emit({"name": FRAME_END, "ph": "i", "pid": 0, "ts": frame + 1, "args": {"frame": frame}})
    stream.flush()
    return stream


def test_a_closed_stream_is_one_json_array(tmp_path: Path) -> None:
    _stream(tmp_path / "t.json", 2).close()
    events = json.loads((tmp_path / "t.json").read_text())
    assert complete_frames(events) == [1, 2] and read_events(tmp_path / "t.json") == events


def test_an_unclosed_stream_cut_mid_line_keeps_every_complete_event(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    stream = _stream(path, 3)
    text = path.read_text()  # flushed, not closed: what a killed run leaves
    stream.close()
    path.write_text(text[: text.rindex(FRAME_END) + 4])  # the last frame end cut mid-write
    assert complete_frames(read_events(path)) == [1, 2]


def test_a_bad_line_before_the_last_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('[\n{"name": "a"},\n{oops},\n{"name": "b"}\n]\n')
    with pytest.raises(ScheduleError, match="line 3: not a JSON event"):
        read_events(path)
