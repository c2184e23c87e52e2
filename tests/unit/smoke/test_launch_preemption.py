"""Preemption across the launcher and the renderer: one exit-code table, the grace period, the job id.

The trainer, the launcher and the operator's failure policy read their exit codes from
``hyperframe.constants.TrainExit``; these tests fail when one of them drifts from it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hyperframe.api.resolve import GRACE_SECONDS, GRACE_SECONDS_CHECKPOINTING
from hyperframe.api.resolved import ResolvedJobConfig
from hyperframe.constants import TrainExit
from hyperframe.controller.policy_failure import PERMANENT_EXIT_CODES, is_permanent_exit
from hyperframe.render import render_job
from hyperframe_runtime import launcher, train
from hyperframe_runtime.jobenv import JobEnv
from hyperframe_runtime.local_plan import plan

REPO = Path(__file__).resolve().parents[3]


def _docs(name: str = "cpu-2node") -> tuple[dict[str, Any], dict[str, Any]]:
    docs = list(yaml.safe_load_all((REPO / "examples" / f"{name}.yaml").read_text()))
    job = next(d for d in docs if d["kind"] == "HyperFrameJob")
    runtime = next(d for d in docs if d["kind"] == "HyperFrameRuntime")
    return job, runtime


def _with_checkpoint(job: dict[str, Any], **checkpoint: Any) -> dict[str, Any]:
    job = copy.deepcopy(job)
    job["spec"]["frames"]["checkpoint"] = {"everyFrames": 5, "volume": "ckpt", **checkpoint}
    job["spec"]["volumes"] = [{"name": "ckpt", "emptyDir": {}}]
    return job


def _rendered(job: dict[str, Any], runtime: dict[str, Any]) -> tuple[ResolvedJobConfig, list[dict[str, Any]]]:
    objects = render_job(copy.deepcopy(job), copy.deepcopy(runtime))
    pods = [o for o in objects if o["kind"] == "Pod"]
    return ResolvedJobConfig.from_json(plan(objects).job_json), pods


def test_the_runtime_exit_codes_are_the_shared_constants() -> None:
    assert train.EXIT_CONFIG is TrainExit.CONFIG and train.EXIT_PREEMPTED is TrainExit.PREEMPTED
    assert launcher.EXIT_CONFIG is TrainExit.CONFIG
    # The operator fails a config error at once and retries a preempted gang.
    assert (
        is_permanent_exit(TrainExit.CONFIG)
        and PERMANENT_EXIT_CODES[TrainExit.CONFIG] == "configuration error"
    )
    assert not is_permanent_exit(TrainExit.PREEMPTED) and not is_permanent_exit(TrainExit.FAILED)
    # Not a code a shell or a signal gives (126..128, 128 + N).
    assert TrainExit.PREEMPTED < 126


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        ([75, 75], 75),  # every rank stopped on SIGTERM
        ([75, 1], 1),  # a crash next to the stop is a crash
        ([2, 75], 2),
        ([-9, 75], 1),  # killed by a signal
        ([-15], 1),
        ([3, 1], 3),
    ],
)
def test_the_container_exit_code_of_failed_ranks(codes: list[int], expected: int) -> None:
    assert launcher.exit_code_of(codes) == expected


def test_the_grace_period_defaults_by_checkpointing_and_is_settable() -> None:
    job, runtime = _docs()
    config, pods = _rendered(job, runtime)
    assert config.termination_grace_period_seconds == GRACE_SECONDS
    assert {p["spec"]["terminationGracePeriodSeconds"] for p in pods} == {GRACE_SECONDS}

    checkpointing = _with_checkpoint(job)
    config, pods = _rendered(checkpointing, runtime)
    assert {p["spec"]["terminationGracePeriodSeconds"] for p in pods} == {GRACE_SECONDS_CHECKPOINTING}
    env = JobEnv.from_env(
        dict(plan(render_job(copy.deepcopy(checkpointing), copy.deepcopy(runtime))).nodes[0].trainer.env)
    )
    args = launcher.torchrun_args(config, env, "/tmp/t.json")
    assert f"--shutdown-timeout={GRACE_SECONDS_CHECKPOINTING - launcher.GRACE_MARGIN_S}" in args

    checkpointing["spec"].setdefault("runPolicy", {})["terminationGracePeriodSeconds"] = 600
    config, pods = _rendered(checkpointing, runtime)
    assert {p["spec"]["terminationGracePeriodSeconds"] for p in pods} == {600}
    assert f"--shutdown-timeout={600 - launcher.GRACE_MARGIN_S}" in launcher.torchrun_args(config, env, "/t")


def test_snapshots_go_to_a_folder_of_the_job_name_and_uid() -> None:
    job, runtime = _docs()
    job = _with_checkpoint(job, keep=5)
    config, _ = _rendered(job, runtime)
    local = launcher.train_config(config)
    assert (local.job_id, local.checkpoint_keep, local.checkpoint_dir) == (
        f"{job['metadata']['name']}-local",
        5,
        "/checkpoints",
    )

    job["metadata"]["uid"] = "6f1c2a9e-0000-4000-8000-00000000beef"
    cluster = launcher.train_config(_rendered(job, runtime)[0])
    assert cluster.job_id == f"{job['metadata']['name']}-6f1c2a9e-0000-4000-8000-00000000beef"
    assert cluster.checkpoint_keep == 5
