"""The runtime's progress reporter keeps posting while a frame runs longer than the heartbeat, and
keeps every update in the latest file (for the termination message) before it posts it."""

from __future__ import annotations

import threading
from pathlib import Path

from hyperframe_runtime.progress import (
    HEARTBEAT_SECONDS,
    ProgressReporter,
    ProgressUpdate,
    StatusPoster,
    post_update,
    read_latest,
)


def update(frame: int) -> ProgressUpdate:
    return ProgressUpdate(
        frame=frame, totalFrames=10, step=frame, loss=1.0, samplesPerSecond=1.0, etaSeconds=1.0
    )


class Recorder:
    def __init__(self) -> None:
        self.posted: list[int] = []
        self.changed = threading.Condition()

    def __call__(self, u: ProgressUpdate) -> bool:
        with self.changed:
            self.posted.append(u.frame)
            self.changed.notify_all()
        return True

    def wait_for(self, count: int) -> list[int]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.posted) >= count, timeout=30), self.posted
            return list(self.posted)


def test_the_latest_update_is_reposted_while_no_frame_ends() -> None:
    recorder = Recorder()
    reporter = ProgressReporter(update(0), post=recorder, interval=0.05)
    try:
        # Before any frame ends, the starting state is posted, then again and again.
        assert recorder.wait_for(3)[:3] == [0, 0, 0]
        reporter.report(update(1))
        posted = recorder.wait_for(len(recorder.posted) + 3)
        assert posted[posted.index(1) :] == [1] * len(posted[posted.index(1) :])
    finally:
        reporter.close()
    assert "progress-heartbeat" not in {t.name for t in threading.enumerate()}, (
        "the heartbeat outlived close()"
    )


def test_heartbeat_keeps_status_younger_than_thirty_seconds() -> None:
    assert HEARTBEAT_SECONDS < 30


def test_no_endpoint_means_no_post() -> None:
    assert post_update(update(1), {}) is False


def test_each_update_is_kept_in_the_latest_file_before_it_is_posted(tmp_path: Path) -> None:
    latest = tmp_path / "progress.json"
    seen_at_post: list[tuple[int, int | float | None]] = []  # (posted frame, frame in the file then)

    def post(u: ProgressUpdate) -> bool:
        kept = read_latest(latest)
        seen_at_post.append((u.frame, kept["frame"] if kept else None))
        return False  # the operator is unreachable: the file still has every figure

    first = ProgressUpdate(
        frame=0,
        totalFrames=3,
        step=0,
        loss=float("nan"),
        samplesPerSecond=float("nan"),
        etaSeconds=float("nan"),
    )
    reporter = ProgressReporter(first, post=post, interval=3600, latest_file=latest)
    try:
        assert read_latest(latest) == {"frame": 0, "totalFrames": 3, "step": 0}, "NaN figures are left out"
        for frame in (1, 2, 3):
            reporter.report(update(frame))
    finally:
        reporter.close()
    # The heartbeat thread may post too; whoever posts, the file is never behind the post.
    assert {1, 2, 3} <= {posted for posted, _ in seen_at_post}
    assert all(kept is not None and kept >= posted for posted, kept in seen_at_post), seen_at_post
    assert read_latest(latest) == update(3).to_wire()


def test_reading_a_missing_or_broken_latest_file_gives_nothing(tmp_path: Path) -> None:
    assert read_latest(tmp_path / "absent.json") is None
    (tmp_path / "broken.json").write_text('{"frame": 3, "lo')
    assert read_latest(tmp_path / "broken.json") is None


def test_report_never_waits_for_a_post_and_the_latest_update_wins() -> None:
    entered, release = threading.Event(), threading.Event()
    posted: list[int] = []

    def slow_post(u: ProgressUpdate) -> bool:
        posted.append(u.frame)
        entered.set()
        release.wait()  # the operator hangs until the test lets it answer
        return True

    reporter = ProgressReporter(update(0), post=slow_post, interval=3600)
    try:
        assert entered.wait(30)  # the first post is in flight and blocked
        done = threading.Thread(target=lambda: [reporter.report(update(f)) for f in (1, 2, 3)])
        done.start()
        done.join(30)
        assert not done.is_alive(), "report() waited for the blocked post"
        release.set()
    finally:
        release.set()
        reporter.close()
    # 1 and 2 were superseded before the poster was free: only the latest is posted.
    assert posted == [0, 3]


def test_the_poster_keeps_one_connection_alive(tmp_path: Path) -> None:
    import http.server

    seen: list[tuple[int, str]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((id(self.connection), self.headers["Authorization"]))
            assert b'"frame"' in body
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    token = tmp_path / "token"
    token.write_text("t0k\n")
    env = {
        "HYPERFRAME_STATUS_URL": f"http://127.0.0.1:{server.server_address[1]}/progress/ns/job",
        "HYPERFRAME_STATUS_TOKEN_FILE": str(token),
    }
    poster = StatusPoster(env)
    try:
        assert all(poster(update(f)) for f in (1, 2, 3))
    finally:
        poster.close()
        server.shutdown()
        server.server_close()
    assert poster.connections == 1 and len({conn for conn, _ in seen}) == 1
    assert [auth for _, auth in seen] == ["Bearer t0k"] * 3
