"""The observability files of real training processes: TensorBoard scalars read back with
TensorBoard's own reader, and a SIGKILLed run whose trace ``hyperframe-sched trace`` still draws.

Each test runs ``torchrun -m hyperframe_runtime.train`` on 2 gloo ranks (a 2-stage pipeline of the
tiny GPT, with the user metrics of ``metered_model``) as a subprocess.
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
from hyperframe.constants import MAX_PROGRESS_METRICS
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.pipeline.recipe import LrSchedule
from hyperframe_runtime.schedule.cli import main as sched_main
from hyperframe_runtime.schedule.tracefile import complete_frames, read_events
from metered_model import user_metrics
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
FIXED_TAGS = {
    "train/loss",
    "train/lr",
    "throughput/samples_per_s",
    "throughput/tokens_per_s",
    "time/frame_s",
    "pipeline/bubble_pct",
    "pipeline/dp_wait_pct",
    "pipeline/data_wait_pct",
    "memory/peak_bytes/rank_0",
    "memory/peak_bytes/rank_1",
}


def _config(trace_dir: Path, frames: int) -> dict[str, Any]:
    return {
        "model": "metered_model:metered_spec",
        "vocab_size": 64,
        "seq_len": 16,
        "d_model": 32,
        "n_heads": 2,
        "n_layers": 2,
        "pipeline": 2,
        "policy": "1f1b",
        "microbatches_per_frame": 4,
        "micro_batch_size": 2,
        "frames": frames,
        "replan_every": 0,
        "trace_dir": str(trace_dir),
        "lr": 0.002,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(tmp_path: Path, frames: int, **recipe: Any) -> tuple[subprocess.Popen[bytes], Path]:
    trace_dir = tmp_path / "trace"
    config = tmp_path / "train.json"
    config.write_text(json.dumps({**_config(trace_dir, frames), **recipe}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    env.pop("HYPERFRAME_STATUS_URL", None)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node=2",
        "--master-addr=127.0.0.1",
        f"--master-port={_free_port()}",
        "-m",
        "hyperframe_runtime.train",
        "--config",
        str(config),
    ]
    with (tmp_path / "out.log").open("wb") as log:
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc, trace_dir


def _output(tmp_path: Path) -> str:
    return (tmp_path / "out.log").read_text(errors="replace")


def _workers(launcher: int) -> list[int]:
    """The trainer processes torchrun started (its children; they run in sessions of their own)."""
    children = Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split()
    return [int(pid) for pid in children]


def _metrics_lines(trace_dir: Path) -> list[dict[str, Any]]:
    path = trace_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and "Z" not in _state(pid):
        assert time.monotonic() < deadline, f"process {pid} still runs after SIGKILL"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_tensorboard_scalars_one_value_per_frame(tmp_path: Path) -> None:
    frames = 3
    recipe = {"lr_schedule": "cosine", "warmup_frames": 1, "min_lr": 0.0002, "grad_clip_norm": 0.5}
    proc, trace_dir = _start(tmp_path, frames, **recipe)
    proc.wait(timeout=300)
    out = _output(tmp_path)
    assert proc.returncode == 0, out
    board = EventAccumulator(str(trace_dir / "tensorboard"), size_guidance={"scalars": 0})
    board.Reload()
    tags = set(board.Tags()["scalars"])
    kept = {f"user/m{i:02d}" for i in range(MAX_PROGRESS_METRICS)}
    expected = FIXED_TAGS | kept | {"train/grad_norm"}  # the norm exists because the recipe clips
    assert tags == expected, sorted(tags ^ expected)
    for tag in tags:
        assert [e.step for e in board.Scalars(tag)] == list(range(1, frames + 1)), tag
    measured = _metrics_lines(trace_dir)
    losses = [e.value for e in board.Scalars("train/loss")]
    assert losses == pytest.approx([m["loss"] for m in measured], rel=1e-6)
    # The learning rate each frame's step used: the recipe's warmup and cosine decay.
    schedule = LrSchedule.of(TrainConfig.from_dict(_config(trace_dir, frames) | recipe))
    lrs = [e.value for e in board.Scalars("train/lr")]
    assert lrs == pytest.approx([schedule.lr_at(step) for step in range(frames)], rel=1e-6)
    assert lrs[-1] < lrs[0]  # decayed, not the constant lr
    assert all(e.value > 0 for e in board.Scalars("train/grad_norm"))
    assert [e.value for e in board.Scalars("user/m05")] == [float(f + 5) for f in range(1, frames + 1)]
    assert len(user_metrics(0)) > MAX_PROGRESS_METRICS
    assert "frame_metrics: dropped 'm64'" in out
    # The run closed its trace: a complete JSON array.
    events = json.loads((trace_dir / "trace.json").read_text())
    assert complete_frames(events) == list(range(1, frames + 1))


def test_killed_run_keeps_its_trace_and_hyperframe_sched_draws_it(tmp_path: Path) -> None:
    proc, trace_dir = _start(tmp_path, 100000)
    deadline = time.monotonic() + 240
    workers: list[int] = []
    try:
        while len(_metrics_lines(trace_dir)) < 3:
            assert proc.poll() is None, _output(tmp_path)
            assert time.monotonic() < deadline, "no 3 frames in time"
            time.sleep(0.05)
        workers = _workers(proc.pid)
    finally:
        for pid in [*workers, proc.pid]:  # the trainers first: torchrun would stop them otherwise
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert len(workers) == 2
    for pid in workers:
        _wait_gone(pid)
    text = (trace_dir / "trace.json").read_text()
    assert not text.rstrip().endswith("]")  # killed: never closed
    logged = [m["frame"] for m in _metrics_lines(trace_dir)]
    frames = complete_frames(read_events(trace_dir / "trace.json"))
    assert frames[: len(logged)] == logged and len(frames) >= 3

    svg = tmp_path / "last.svg"
    assert sched_main(["trace", str(trace_dir / "trace.json"), "--gantt", str(svg)]) == 0
    body = svg.read_text()
    assert body.startswith("<svg") and f"frame {frames[-1]} (measured)" in body
    # 2 ranks x 4 micro-batches x (F + B) per 1F1B frame on one stage per rank.
    assert body.count("<rect") >= 16
