"""SIGTERM at a frame boundary, snapshots per job, keep/prune and mismatch refusal, on real ranks.

Every run is a real process tree as in a pod: the launcher's torchrun wrapper
(``launch_driver.py``) starts two gloo ranks of ``hyperframe-train``; the test sends the
driver a real SIGTERM (what the kubelet sends the container on preemption, drain or deletion),
which torchrun forwards to the ranks' process groups.

- the uninterrupted run keeps only the newest ``checkpoint_keep`` complete snapshots;
- the SIGTERMed run stops at a frame boundary with a complete snapshot of that frame and exits
  ``TrainExit.PREEMPTED`` before torchrun's shutdown timeout; resumed, the loss sequence of both
  parts equals the uninterrupted one exactly;
- another job id (a re-created job) on the same volume starts afresh;
- a run of another world size and layout on the job's snapshots exits 2 naming what differs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hyperframe.constants import TrainExit
from hyperframe_runtime.pipeline.checkpoint import META_FILE, complete_snapshots, job_dir

pytestmark = pytest.mark.slow

DRIVER = Path(__file__).with_name("launch_driver.py")
FRAMES = 10
EVERY = 3
KEEP = 3
SHUTDOWN_TIMEOUT_S = 60
SIGTERM_AFTER = 4  # frames in metrics.jsonl before the SIGTERM: in frame 5, between periodic saves
SAVES = [f for f in range(1, FRAMES + 1) if f % EVERY == 0 or f == FRAMES]
JOB = "train-0f3c"


def _config(tmp: Path, name: str, **fields: Any) -> Path:
    config = {
        "vocab_size": 64,
        "seq_len": 32,
        "d_model": 64,
        "n_heads": 2,
        "n_layers": 4,
        "pipeline": 2,
        "policy": "1f1b",
        "microbatches_per_frame": 8,
        "micro_batch_size": 4,
        "frames": FRAMES,
        "checkpoint_dir": str(tmp / "volume"),
        "checkpoint_every": EVERY,
        "checkpoint_keep": KEEP,
        "job_id": JOB,
        "trace_dir": str(tmp / name),
        "lr": 3e-3,
        "seed": 11,
        **fields,
    }
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(tmp: Path, name: str, nproc: int = 2) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            str(DRIVER),
            str(nproc),
            str(_port()),
            str(SHUTDOWN_TIMEOUT_S),
            str(tmp / f"{name}.json"),
            str(tmp / f"{name}.result.json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=600)
    return proc.returncode, out


def _losses(tmp: Path, name: str) -> list[tuple[int, float]]:
    path = tmp / name / "metrics.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [(m["frame"], m["loss"]) for m in map(json.loads, lines)]


def _frames_logged(tmp: Path, name: str) -> int:
    path = tmp / name / "metrics.jsonl"
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("preempt")
    found: dict[str, Any] = {"tmp": tmp}
    # The uninterrupted run and the SIGTERMed one run side by side (different volumes).
    _config(tmp, "full", checkpoint_dir=str(tmp / "full-volume"))
    _config(tmp, "cut")
    full, cut = _start(tmp, "full"), _start(tmp, "cut")
    deadline = time.monotonic() + 300
    while _frames_logged(tmp, "cut") < SIGTERM_AFTER and cut.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cut.poll() is None, _finish(cut)[1]
    found["frames_at_sigterm"] = _frames_logged(tmp, "cut")
    sent = time.monotonic()
    cut.send_signal(signal.SIGTERM)
    found["cut"] = _finish(cut)
    found["stop_s"] = time.monotonic() - sent
    found["full"] = _finish(full)
    found["after_cut"] = complete_snapshots(job_dir(tmp / "volume", JOB))
    newest = job_dir(tmp / "volume", JOB) / f"frame-{found['after_cut'][-1]:06d}" / META_FILE
    found["meta"] = json.loads(newest.read_text()) if newest.exists() else None

    _config(tmp, "resumed")
    found["resumed"] = _finish(_start(tmp, "resumed"))
    _config(tmp, "recreated", job_id="train-9a71", frames=2)
    found["recreated"] = _finish(_start(tmp, "recreated"))
    _config(tmp, "mismatch", pipeline=1, n_layers=6, frames=FRAMES + 1)
    found["mismatch"] = _finish(_start(tmp, "mismatch", nproc=1))
    return found


def test_the_uninterrupted_run_keeps_the_newest_snapshots(runs: dict[str, Any]) -> None:
    tmp = runs["tmp"]
    code, out = runs["full"]
    assert code == 0, out
    assert complete_snapshots(job_dir(tmp / "full-volume", JOB)) == SAVES[-KEEP:]
    assert [f for f, _ in _losses(tmp, "full")] == list(range(1, FRAMES + 1))


def test_sigterm_stops_at_a_frame_boundary_with_a_complete_snapshot(runs: dict[str, Any]) -> None:
    tmp = runs["tmp"]
    code, out = runs["cut"]
    result = json.loads((tmp / "cut.result.json").read_text())
    assert code == TrainExit.PREEMPTED, out
    assert result["exit_code"] == TrainExit.PREEMPTED and "SIGTERM" in result["reason"], result
    # The ranks stopped by themselves, before torchrun's shutdown timeout ran out.
    assert runs["stop_s"] < SHUTDOWN_TIMEOUT_S, runs["stop_s"]
    assert "forcefully exiting" not in out, out
    cut = [f for f, _ in _losses(tmp, "cut")]
    stopped = cut[-1]
    assert cut == list(range(1, stopped + 1)) and SIGTERM_AFTER <= stopped < FRAMES, cut
    # That frame's snapshot is complete and the newest, next to the periodic ones before it.
    assert runs["after_cut"] == sorted({*(f for f in SAVES if f < stopped), stopped}), runs["after_cut"]
    assert runs["meta"]["frames_done"] == stopped and runs["meta"]["world_size"] == 2, runs["meta"]


def test_the_resumed_run_continues_with_the_uninterrupted_losses(runs: dict[str, Any]) -> None:
    tmp = runs["tmp"]
    code, out = runs["resumed"]
    assert code == 0, out
    stitched = _losses(tmp, "cut") + _losses(tmp, "resumed")
    assert stitched == _losses(tmp, "full")  # exactly: same ops on the same state


def test_a_recreated_job_on_the_same_volume_starts_afresh(runs: dict[str, Any]) -> None:
    tmp = runs["tmp"]
    code, out = runs["recreated"]
    assert code == 0, out
    assert _losses(tmp, "recreated") == _losses(tmp, "full")[:2]
    assert complete_snapshots(job_dir(tmp / "volume", "train-9a71")) == [2]


def test_a_snapshot_of_another_layout_and_model_is_refused_as_a_config_error(runs: dict[str, Any]) -> None:
    tmp = runs["tmp"]
    code, out = runs["mismatch"]
    assert code == TrainExit.CONFIG, out
    assert "was saved by another run: world size 2 (this run: 1)" in out, out
    assert "layout pipeline 2 (this run: 1)" in out and "model n_layers 4 (this run: 6)" in out, out
    assert _losses(tmp, "mismatch") == []


def test_sigterm_with_dataloader_workers_still_stops_at_a_frame_boundary(tmp_path: Path) -> None:
    """torchrun signals each rank's whole process group: the rank's DataLoader workers must not die
    of that SIGTERM, since the rank still reads the batches of the frame it finishes."""
    from hyperframe_runtime.data.prepare import prepare_bytes

    shards = tmp_path / "shards"
    prepare_bytes([Path(__file__)], shards, shard_tokens=1000)
    _config(
        tmp_path,
        "data",
        vocab_size=256,
        frames=1000,
        data_shards=str(shards),
        data_workers=2,
        data_prefetch=2,
    )
    proc = _start(tmp_path, "data")
    deadline = time.monotonic() + 300
    while _frames_logged(tmp_path, "data") < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, _finish(proc)[1]
    proc.send_signal(signal.SIGTERM)
    code, out = _finish(proc)
    assert code == TrainExit.PREEMPTED, out
    assert "DataLoader worker" not in out, out
    stopped = _losses(tmp_path, "data")[-1][0]
    assert stopped in complete_snapshots(job_dir(tmp_path / "volume", JOB)), out
