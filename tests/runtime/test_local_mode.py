"""``hyperframe local`` end to end on CPU: the gate, training with a falling loss, failures, Ctrl-C.

Each test runs the real command (``python -m hyperframe.cli local ...``) as a subprocess.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hyperframe_runtime.local_plan import parse_progress_line

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _local(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hyperframe.cli", "local", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def _edited_example(tmp_path: Path, name: str, smoke: dict[str, Any], frames: int | None = None) -> Path:
    docs = list(yaml.safe_load_all((REPO / "examples" / f"{name}.yaml").read_text()))
    for doc in docs:
        if doc["kind"] == "HyperFrameRuntime":
            doc["spec"]["smoke"].update(smoke)
        if doc["kind"] == "HyperFrameJob" and frames is not None:
            doc["spec"]["frames"]["frames"] = frames
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_two_nodes_gate_passes_training_runs_and_loss_falls(tmp_path: Path) -> None:
    result = _local("examples/cpu-2node.yaml", "--workdir", str(tmp_path))
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "== smoke gate passed" in out
    assert "[node 0 gate]" in out and "[node 1 gate]" in out
    frames = [f for line in out.splitlines() if (f := parse_progress_line(line)) is not None]
    assert frames, out
    assert frames[-1].frame == frames[-1].total_frames
    assert frames[-1].loss < frames[0].loss, f"loss did not fall: {frames[0].loss} -> {frames[-1].loss}"
    assert "(fell)" in out.splitlines()[-1]
    assert (tmp_path / "smoke-node0.json").exists() and (tmp_path / "launch-node1.json").exists()
    # The launcher's termination message carries the trainer's final figures (what the operator
    # writes into a finished job's status.progress), the same as the last progress line.
    final = json.loads((tmp_path / "launch-node0.json").read_text())["progress"]
    assert (final["frame"], final["totalFrames"]) == (frames[-1].frame, frames[-1].total_frames)
    assert abs(final["loss"] - frames[-1].loss) < 1e-3


def test_gate_failure_exits_nonzero_with_reason_and_remedy(tmp_path: Path) -> None:
    job = _edited_example(tmp_path, "cpu-tiny", {"minBusBandwidthGBps": 100000})
    result = _local(str(job), "--workdir", str(tmp_path / "work"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "== smoke gate FAILED on node 0 (exit 1) [collective.busbw]" in result.stdout
    assert "remedy: Bus bandwidth is low" in result.stdout
    assert "== training" not in result.stdout


def test_invalid_job_exits_2_naming_the_field(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all((REPO / "examples" / "cpu-tiny.yaml").read_text()))
    for doc in docs:
        if doc["kind"] == "HyperFrameJob":
            doc["spec"]["parallelism"]["pipeline"] = 3
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = _local(str(path))
    assert result.returncode == 2
    assert "spec.parallelism" in result.stderr


def _marked(workdir: Path) -> list[int]:
    """Pids of processes started for this run (they carry HYPERFRAME_WORKDIR=<workdir>)."""
    needle = f"HYPERFRAME_WORKDIR={workdir}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def test_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    job = _edited_example(tmp_path, "cpu-2node", {}, frames=1_000_000)  # still training when stopped
    workdir = tmp_path / "work"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hyperframe.cli", "local", str(job), "--workdir", str(workdir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        # As a shell starts a background job: SIGINT ignored. Ctrl-C must still stop the run.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert proc.stdout is not None
        seen = []
        deadline = time.monotonic() + 600
        for line in proc.stdout:  # wait until the ranks are training
            seen.append(line)
            if parse_progress_line(line) is not None or time.monotonic() > deadline:
                break
        assert any(parse_progress_line(line) for line in seen), "".join(seen)
        assert len(_marked(workdir)) >= 6, "expected 2 launchers and 4 ranks running"
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 130, "".join(seen) + rest
        assert "== interrupted: stopping every node" in rest
        results = [json.loads(p.read_text()) for p in workdir.glob("launch-node*.json")]
        assert results, "the launchers must write their result when stopped"
        assert all(not r["ok"] and "signal" in r["reason"] for r in results), results
        time.sleep(0.5)
        assert _marked(workdir) == [], "orphan processes left behind"
    finally:
        # Whatever failed above, leave nothing running for the rest of the session.
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for pid in _marked(workdir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
