"""entrypoint.script: a plain torchrun script rendered like every HyperFrame job.

Same launcher command (which runs torchrun after the same gate), same rendezvous env and
golden NCCL/torch env, same /dev/shm, devices and security; no frames, and the grace period
from runPolicy or the default without checkpoints.
"""

from __future__ import annotations

import copy
from typing import Any

from api_helpers import example_pair, patched
from hyperframe.api.resolve import GRACE_SECONDS
from hyperframe.api.resolved import ResolvedJobConfig
from hyperframe.render import render_job

USER = "user-project/job.yaml"


def _render(job: dict[str, Any], runtime: dict[str, Any]) -> tuple[list[dict[str, Any]], ResolvedJobConfig]:
    objects = render_job(job, runtime)
    config_map = next(o for o in objects if o["kind"] == "ConfigMap")
    pods = [o for o in objects if o["kind"] == "Pod"]
    return pods, ResolvedJobConfig.from_json(config_map["data"]["job.json"])


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_a_script_job_renders_the_same_pods_as_a_builtin_job_of_the_same_shape() -> None:
    job, runtime = example_pair(USER)
    builtin = patched(
        job,
        {
            "spec": {
                "entrypoint": {"script": "__delete__", "builtin": {"model": "tiny-gpt"}},
                "parallelism": {"pipeline": 2, "data": 2},
                "frames": {"frames": 3, "schedulePolicy": "gpipe"},
            }
        },
    )
    script_pods, _ = _render(job, runtime)
    builtin_pods, _ = _render(builtin, copy.deepcopy(runtime))
    # Only the ConfigMap's content differs: the pods are the same objects.
    assert script_pods == builtin_pods
    pod = script_pods[1]
    gate, trainer = pod["spec"]["initContainers"][0], pod["spec"]["containers"][0]
    assert (gate["command"], trainer["command"]) == (["hyperframe-smoke"], ["hyperframe-launch"])
    env = _env(trainer)
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "user-ddp-0.user-ddp.default.svc"
    assert (env["WORLD_SIZE"], env["PET_NNODES"], env["PET_NODE_RANK"], env["PET_NPROC_PER_NODE"]) == (
        "4", "2", "1", "2",
    )  # fmt: skip
    assert env["OMP_NUM_THREADS"] == "1"  # the runtime's golden env
    assert {"name": "hyperframe-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}} in pod["spec"][
        "volumes"
    ]


def test_job_json_carries_the_script_and_no_frames() -> None:
    _, config = _render(*example_pair(USER))
    assert config.frames is None and config.parallelism is None and config.data is None
    script = config.entrypoint.script
    assert script is not None
    assert (script.module, script.path, script.args) == (
        "user_project.train_ddp", None, ("--data", "/data", "--steps", "40"),
    )  # fmt: skip
    assert config.world_size == 4


def test_the_grace_period_is_rendered_as_for_every_job() -> None:
    job, runtime = example_pair(USER)
    pods, config = _render(job, runtime)
    assert {p["spec"]["terminationGracePeriodSeconds"] for p in pods} == {GRACE_SECONDS}
    job = patched(job, {"spec": {"runPolicy": {"terminationGracePeriodSeconds": 90}}})
    pods, config = _render(job, runtime)
    assert {p["spec"]["terminationGracePeriodSeconds"] for p in pods} == {90}
    assert config.termination_grace_period_seconds == 90


def test_a_gpu_script_job_gets_the_gpus_and_rdma_of_the_runtime() -> None:
    job, runtime = example_pair("gpu-rdma.yaml")
    script = {"path": "train.py", "args": ["--epochs", "1"]}
    job = patched(
        job, {"spec": {"entrypoint": {"builtin": "__delete__", "module": "__delete__", "script": script}}}
    )
    for key in ("frames", "parallelism", "data"):
        job["spec"].pop(key, None)
    builtin_pods, _ = _render(*example_pair("gpu-rdma.yaml"))
    pods, config = _render(job, runtime)
    trainer = pods[0]["spec"]["containers"][0]
    assert trainer["resources"] == builtin_pods[0]["spec"]["containers"][0]["resources"]
    assert trainer["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert config.backend == "nccl" and config.entrypoint.script is not None
