"""hyperframe_runtime.report(): a script's progress takes the runtime's own path to the operator.

Each case runs a real Python process that calls ``report()`` the way a script does, with the
env a HyperFrame pod gives it: the launcher's progress file and the operator's endpoint (here a
local HTTP server that checks the bearer token, as the operator's TokenReview does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

SCRIPT = """
import hyperframe_runtime
for step in range(1, 4):
    hyperframe_runtime.report(step=step, loss=1.0 / step, total_steps=3, tokens_seen=step * 64.0)
"""


def _run(env: dict[str, str], code: str = SCRIPT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[tuple[str, Path, list[dict[str, Any]]]]:
    posts: list[dict[str, Any]] = []
    token = tmp_path / "token"
    token.write_text("pod-token\n")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            ok = self.headers["Authorization"] == "Bearer pod-token"
            if ok:
                posts.append(json.loads(body))
            self.send_response(200 if ok else 403)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/progress", token, posts
    finally:
        server.shutdown()
        server.server_close()


def test_rank_zero_keeps_each_step_and_posts_the_latest(
    tmp_path: Path, endpoint: tuple[str, Path, list[dict[str, Any]]]
) -> None:
    url, token, posts = endpoint
    latest = tmp_path / "progress.json"
    done = _run(
        {"RANK": "0", "HYPERFRAME_PROGRESS_FILE": str(latest), "HYPERFRAME_STATUS_URL": url,
         "HYPERFRAME_STATUS_TOKEN_FILE": str(token)}
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    kept = json.loads(latest.read_text())
    assert (kept["frame"], kept["step"], kept["totalFrames"], kept["etaSeconds"]) == (3, 3, 3, 0.0)
    assert kept["loss"] == pytest.approx(1 / 3) and kept["metrics"] == {"tokens_seen": 192.0}
    assert "samplesPerSecond" not in kept  # not given: left out, not reported as 0
    # Posting runs in a background thread, latest wins: a step may be skipped when the next one
    # comes before the post, but the last one is posted and the order never goes back.
    steps = [p["step"] for p in posts]
    assert steps and steps[-1] == 3 and steps == sorted(steps), steps
    assert next(p for p in posts if p["step"] == 3)["metrics"] == {"tokens_seen": 192.0}


def test_other_ranks_report_nothing(tmp_path: Path, endpoint: tuple[str, Path, list[dict[str, Any]]]) -> None:
    url, token, posts = endpoint
    latest = tmp_path / "progress.json"
    code = SCRIPT + "\nassert hyperframe_runtime.report(step=4) is False\n"
    done = _run(
        {"RANK": "1", "HYPERFRAME_PROGRESS_FILE": str(latest), "HYPERFRAME_STATUS_URL": url,
         "HYPERFRAME_STATUS_TOKEN_FILE": str(token)},
        code,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not latest.exists() and posts == []


def test_outside_a_pod_it_only_logs_and_a_bad_step_is_refused() -> None:
    done = _run({"RANK": ""}, SCRIPT + "\nhyperframe_runtime.report(step=-1)\n")
    assert done.returncode != 0
    assert "report(step=-1): step must be a non-negative integer" in done.stderr


def test_importing_the_runtime_for_report_does_not_import_torch() -> None:
    done = _run(
        {}, "import sys, hyperframe_runtime\nhyperframe_runtime.report\nassert 'torch' not in sys.modules\n"
    )
    assert done.returncode == 0, done.stderr
