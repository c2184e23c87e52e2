"""entrypoint.script through the real launcher: torchrun runs the user's script on gloo ranks.

examples/user-project's data-prepare step writes the data, then ``hyperframe-launch`` runs its
DDP script (``-m user_project.train_ddp``) with the job.json and env the operator renders (made
local: loopback rendezvous). Its ``hyperframe_runtime.report()`` calls reach the termination
message through the runtime's progress file; exit codes are classified as for the runtime's own
trainer; SIGTERM stops the script as preempted; and an image whose hyperframe-runtime is not the
version the operator expects is a config error naming both versions.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from gatejobs import REPO, free_port
from hyperframe.constants import TrainExit
from hyperframe.render import render_job
from hyperframe.version import distribution_version
from hyperframe_runtime.local_plan import localize, plan

PROJECT = REPO / "examples" / "user-project"
SCRIPTS = Path(__file__).with_name("user_scripts")


def _job_and_runtime() -> tuple[dict[str, Any], dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((PROJECT / "job.yaml").read_text()) if d]
    job = next(d for d in docs if d["kind"] == "HyperFrameJob")
    runtime = next(d for d in docs if d["kind"] == "HyperFrameRuntime")
    job["spec"]["nodes"] = 1
    return job, runtime


def _launch(
    tmp: Path, script: dict[str, Any], *, job_json_edit: dict[str, Any] | None = None
) -> tuple[subprocess.Popen[str], Path, Path]:
    """Start node 0's launcher of the example job with ``script`` as entrypoint.script."""
    job, runtime = _job_and_runtime()
    job["spec"]["entrypoint"] = {"script": script}
    local = plan(render_job(job, runtime))
    config = tmp / "job.json"
    config.write_text(json.dumps({**json.loads(local.job_json), **(job_json_edit or {})}))
    trainer = localize(local.nodes[0].trainer, port=free_port(), config_path=str(config))
    log, workdir = tmp / "termination.json", tmp / "work"
    env = {**os.environ, **trainer.env, "PYTHONPATH": os.pathsep.join([str(PROJECT), str(SCRIPTS)])}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            trainer.module,
            *trainer.args,
            "--termination-log",
            str(log),
            "--workdir",
            str(workdir),
        ],
        env=env,
        cwd=SCRIPTS,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, log, workdir


def _finish(
    proc: subprocess.Popen[str], log: Path, timeout_s: float = 300
) -> tuple[int, dict[str, Any], str]:
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    finally:
        proc.kill()
    return proc.returncode, json.loads(log.read_text()), out


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("data")
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    done = subprocess.run(
        [sys.executable, "-m", "user_project.prepare", "--out", str(out), "--samples", "512"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (out / "train.pt").is_file()
    return out


def test_the_ddp_script_trains_and_its_reports_reach_the_termination_message(
    tmp_path: Path, data_dir: Path
) -> None:
    script = {"module": "user_project.train_ddp", "args": ["--data", str(data_dir), "--steps", "30"]}
    proc, log, _ = _launch(tmp_path, script)
    code, result, out = _finish(proc, log)
    assert code == 0, out
    assert result["ok"] is True
    progress = result["progress"]
    assert (progress["frame"], progress["step"], progress["totalFrames"]) == (30, 30, 30), progress
    assert progress["etaSeconds"] == 0.0
    assert "trained 30 steps on 2 ranks" in out
    # The loss fell: the data is a linear map the model can learn.
    first = re.search(r"final loss ([0-9.]+)", out)
    assert first is not None and float(first.group(1)) < 1.0, out


@pytest.mark.parametrize(
    ("code", "expected"),
    [(2, TrainExit.CONFIG), (1, TrainExit.FAILED), (0, TrainExit.OK)],
)
def test_a_script_exit_code_is_classified_as_the_runtime_s(tmp_path: Path, code: int, expected: int) -> None:
    # (75 reads as preempted only when every failed rank exits 75, as for the runtime's trainer;
    # the SIGTERM test below covers it.)
    proc, log, _ = _launch(tmp_path, {"path": "exit_with.py", "args": [str(code)]})
    exit_code, result, out = _finish(proc, log)
    assert exit_code == expected, out
    assert result["exit_code"] == expected and result["ok"] is (expected == 0)
    if expected == 0:  # a failing rank may stop rank 0 before it reports
        assert result["progress"]["step"] == 1 and result["progress"]["loss"] == 0.5


def test_sigterm_stops_the_script_as_preempted(tmp_path: Path, data_dir: Path) -> None:
    script = {"module": "user_project.train_ddp", "args": ["--data", str(data_dir), "--steps", "1000000"]}
    proc, log, workdir = _launch(tmp_path, script)
    deadline = time.monotonic() + 240
    # Training has begun once rank 0 kept its first report.
    while not any(workdir.glob("progress-*.json")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, "the launcher ended before the script reported"
    proc.send_signal(signal.SIGTERM)
    code, result, out = _finish(proc, log)
    assert code == TrainExit.PREEMPTED, out
    assert result["progress"]["step"] >= 1


def test_an_image_with_another_runtime_version_is_a_config_error_naming_both(tmp_path: Path) -> None:
    proc, log, _ = _launch(
        tmp_path, {"path": "exit_with.py", "args": ["0"]}, job_json_edit={"runtimeVersion": "0.0.9"}
    )
    code, result, out = _finish(proc, log)
    assert code == TrainExit.CONFIG, out
    assert (
        f"hyperframe-runtime {distribution_version('hyperframe-runtime')}, but the operator expects 0.0.9"
        in result["reason"]
    )
    assert "hyperframe image build" in result["reason"]


def test_hyperframe_local_runs_a_script_job_as_processes(tmp_path: Path, data_dir: Path) -> None:
    docs = [d for d in yaml.safe_load_all((PROJECT / "job.yaml").read_text()) if d]
    job = next(d for d in docs if d["kind"] == "HyperFrameJob")
    job["spec"]["entrypoint"]["script"]["args"] = ["--data", str(data_dir), "--steps", "5"]
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    done = subprocess.run(
        [sys.executable, "-m", "hyperframe.cli", "local", str(manifest), "--workdir", str(tmp_path / "run")],
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "== smoke gate passed" in done.stdout
    assert "trained 5 steps on 4 ranks" in done.stdout
    final = json.loads((tmp_path / "run" / "launch-node0.json").read_text())
    assert final["ok"] is True and final["progress"]["step"] == 5
