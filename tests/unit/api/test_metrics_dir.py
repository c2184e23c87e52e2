"""spec.frames.metrics.dir: rendered into job.json and mapped onto the trainer's trace_dir."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hyperframe.api.resolved import ResolvedJobConfig
from hyperframe.render import render_job
from hyperframe_runtime import launcher
from hyperframe_runtime.local_plan import plan

REPO = Path(__file__).resolve().parents[3]


def _trace_dir(frames: dict[str, Any]) -> str:
    docs = list(yaml.safe_load_all((REPO / "examples" / "cpu-2node.yaml").read_text()))
    job = copy.deepcopy(next(d for d in docs if d["kind"] == "HyperFrameJob"))
    runtime = next(d for d in docs if d["kind"] == "HyperFrameRuntime")
    job["spec"]["frames"].update(frames)
    if "checkpoint" in frames:
        job["spec"]["volumes"] = [{"name": "ckpt", "emptyDir": {}}]
        job["spec"]["volumeMounts"] = [{"name": "ckpt", "mountPath": frames["checkpoint"]["path"]}]
    resolved = ResolvedJobConfig.from_json(plan(render_job(job, runtime)).job_json)
    return launcher.train_config(resolved).trace_dir


def test_a_set_metrics_dir_reaches_the_trainer() -> None:
    assert _trace_dir({"metrics": {"dir": "/data/runs/one"}}) == "/data/runs/one"


def test_the_default_is_a_per_job_folder_on_the_checkpoint_volume() -> None:
    checkpoint = {"everyFrames": 2, "volume": "ckpt", "path": "/ckpt"}
    assert _trace_dir({"checkpoint": checkpoint}) == "/ckpt/metrics/cpu-2node"


def test_no_checkpoint_and_no_dir_writes_no_files() -> None:
    assert _trace_dir({}) == ""
