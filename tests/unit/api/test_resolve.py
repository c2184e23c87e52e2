"""Resolution: runtime defaults, then the overrides the runtime allows; cross-object errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hyperframe.api.errors import SpecError
from hyperframe.api.models import parse_job, parse_runtime
from hyperframe.api.resolve import Resolution, resolve, stages_per_rank
from hyperframe.api.runtime import OVERRIDABLE
from test_defaults import MINIMAL_JOB, MINIMAL_RUNTIME


def run(job_patch: dict[str, Any] | None = None, rt_patch: dict[str, Any] | None = None) -> Resolution:
    job = copy.deepcopy(MINIMAL_JOB)
    rt = copy.deepcopy(MINIMAL_RUNTIME)
    # 2 x 8 GPUs as pipeline 2 x data 8: gpt-small's 12 layers split over 2 x 2 stages.
    job["spec"]["parallelism"] = {"pipeline": 2, "data": 8}
    job["spec"].update(job_patch or {})
    rt["spec"].update(rt_patch or {})
    return resolve(parse_job(job), parse_runtime(rt))


def errors(job_patch: dict[str, Any] | None = None, rt_patch: dict[str, Any] | None = None) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        run(job_patch, rt_patch)
    return {e.path: str(e) for e in info.value.errors}


OVERRIDE_EXAMPLES: dict[str, dict[str, Any]] = {
    "shmSize": {"shmSize": "32Gi"},
    "env": {"env": [{"name": "NCCL_DEBUG", "value": "INFO"}]},
    "tolerations": {"tolerations": [{"operator": "Exists"}]},
    "nodeSelector": {"nodeSelector": {"pool": "a"}},
    "schedulerName": {"schedulerName": "custom"},
    "priorityClassName": {"priorityClassName": "high"},
    "hostNetwork": {"hostNetwork": True},
    "smoke.enabled": {"smoke": {"enabled": False}},
    "smoke.minBusBandwidthGBps": {"smoke": {"minBusBandwidthGBps": 12.5}},
    "smoke.timeoutSeconds": {"smoke": {"timeoutSeconds": 60}},
}


# "image" allows spec.image, not a field of spec.runtimeOverrides (tests/unit/api/test_job_image.py).
RUNTIME_OVERRIDES = tuple(k for k in OVERRIDABLE if k != "image")


def test_every_overridable_field_has_an_example() -> None:
    assert set(OVERRIDE_EXAMPLES) == set(RUNTIME_OVERRIDES)


@pytest.mark.parametrize("key", RUNTIME_OVERRIDES)
def test_override_forbidden_by_default_names_field_and_runtime(key: str) -> None:
    errs = errors({"runtimeOverrides": OVERRIDE_EXAMPLES[key]})
    path = f"spec.runtimeOverrides.{key}"
    assert list(errs) == [path]
    assert 'HyperFrameRuntime "rt" does not allow overriding' in errs[path]
    assert f'add "{key}" to spec.allowedOverrides of "rt"' in errs[path]


@pytest.mark.parametrize("key", RUNTIME_OVERRIDES)
def test_allowed_override_takes_effect(key: str) -> None:
    base_env = [{"name": "NCCL_DEBUG", "value": "WARN"}, {"name": "NCCL_IB_HCA", "value": "mlx5"}]
    res = run(
        {"runtimeOverrides": OVERRIDE_EXAMPLES[key]},
        {"allowedOverrides": [key], "pod": {"env": base_env}},
    )
    pod, smoke = res.pod, res.config.smoke
    observed = {
        "shmSize": lambda: pod.shm_size == "32Gi" and smoke.shm_size_bytes == 32 << 30,
        # Replaced by name, order kept, others untouched.
        "env": lambda: (
            [(e.name, e.value) for e in pod.env] == [("NCCL_DEBUG", "INFO"), ("NCCL_IB_HCA", "mlx5")]
        ),
        "tolerations": lambda: [t.operator for t in pod.tolerations] == ["Exists"],
        "nodeSelector": lambda: dict(pod.node_selector) == {"pool": "a"},
        "schedulerName": lambda: pod.scheduler_name == "custom",
        "priorityClassName": lambda: pod.priority_class_name == "high",
        "hostNetwork": lambda: pod.host_network is True,
        "smoke.enabled": lambda: smoke.enabled is False,
        "smoke.minBusBandwidthGBps": lambda: smoke.min_bus_bandwidth_gbps == 12.5,
        "smoke.timeoutSeconds": lambda: smoke.timeout_seconds == 60,
    }
    assert observed[key]()


def test_allowing_one_smoke_field_does_not_allow_another() -> None:
    errs = errors(
        {"runtimeOverrides": {"smoke": {"enabled": False, "timeoutSeconds": 60}}},
        {"allowedOverrides": ["smoke.enabled"]},
    )
    assert list(errs) == ["spec.runtimeOverrides.smoke.timeoutSeconds"]


def test_override_env_can_add_new_names() -> None:
    res = run(
        {"runtimeOverrides": {"env": [{"name": "NCCL_ALGO", "value": "Ring"}]}},
        {"allowedOverrides": ["env"], "pod": {"env": [{"name": "NCCL_DEBUG", "value": "WARN"}]}},
    )
    assert [e.name for e in res.pod.env] == ["NCCL_DEBUG", "NCCL_ALGO"]


def test_user_env_follows_golden_env_and_may_not_shadow_it() -> None:
    golden = {"pod": {"env": [{"name": "NCCL_DEBUG", "value": "WARN"}]}}
    res = run({"env": [{"name": "HF_HOME", "value": "/data"}]}, golden)
    assert [e.name for e in res.pod.env] == ["NCCL_DEBUG", "HF_HOME"]
    errs = errors(
        {"env": [{"name": "HF_HOME", "value": "/d"}, {"name": "NCCL_DEBUG", "value": "INFO"}]}, golden
    )
    assert list(errs) == ["spec.env[1].name"]
    assert "golden NCCL/torch table" in errs["spec.env[1].name"]


def test_the_given_runtime_is_used_and_recorded() -> None:
    # Trying a job against another profile is allowed; job.json says which one it was.
    assert run({"runtimeRef": {"name": "other"}}).config.runtime_name == "rt"


def test_gpu_job_on_cpu_profile_is_rejected_and_cpu_job_gets_gloo() -> None:
    assert list(errors(rt_patch={"accelerator": "cpu"})) == ["spec.gpusPerNode"]
    cpu = run(
        {
            "gpusPerNode": 0,
            "procsPerNode": 8,
            "parallelism": {"pipeline": 4, "data": 4},
            "frames": {"frames": 1, "schedulePolicy": "gpipe"},
        },
        {"accelerator": "cpu"},
    )
    assert cpu.config.backend == "gloo"
    assert cpu.config.procs_per_node == 8 and cpu.config.world_size == 16
    assert cpu.config.smoke.device_checks == ()


def test_gpu_job_resolution() -> None:
    res = run()
    cfg = res.config
    assert cfg.backend == "nccl"
    assert (cfg.nodes, cfg.gpus_per_node, cfg.procs_per_node, cfg.world_size) == (2, 8, 8, 16)
    assert cfg.smoke.device_checks == ("visible", "memory", "matmul")
    assert cfg.smoke.nccl_message_sizes == (1 << 20, 64 << 20)
    assert cfg.rendezvous.master_addr == "j-0.j.default.svc"
    assert cfg.rendezvous.master_port == 29500 and cfg.rendezvous.timeout_seconds == 900
    assert cfg.job.name == "j" and cfg.job.namespace == "default" and cfg.job.uid is None
    assert cfg.runtime_name == "rt"
    assert cfg.entrypoint.builtin is not None and cfg.entrypoint.builtin.layers == 12


def test_builtin_size_parameters_override_the_preset() -> None:
    res = run({"entrypoint": {"builtin": {"model": "gpt-small", "layers": 8, "heads": 8}}})
    b = res.config.entrypoint.builtin
    assert b is not None and (b.layers, b.heads, b.hidden_size) == (8, 8, 768)


def test_builtin_heads_must_divide_hidden_size() -> None:
    errs = errors({"entrypoint": {"builtin": {"model": "gpt-small", "heads": 7}}})
    assert list(errs) == ["spec.entrypoint.builtin.heads"]


@pytest.mark.parametrize(
    ("policy", "per_rank"), [("gpipe", 1), ("1f1b", 1), ("interleaved1f1b", 2), ("zbv", 2), ("hyperframe", 2)]
)
def test_stages_per_rank_and_layer_split(policy: str, per_rank: int) -> None:
    assert stages_per_rank(policy) == per_rank
    job = {
        "parallelism": {"pipeline": 4, "data": 4},
        "frames": {"frames": 1, "schedulePolicy": policy, "microBatchesPerFrame": 8},
    }
    # gpt-small has 12 layers: 4 or 8 stages take them (8 unevenly); 4 layers cannot fill 8 stages.
    assert run(job).config.frames.stages_per_rank == per_rank
    small = {**job, "entrypoint": {"builtin": {"model": "gpt-small", "layers": 4}}}
    if per_rank == 1:
        assert run(small).config.frames.stages_per_rank == 1
    else:
        assert "4 layers cannot fill pipeline (4) x 2" in errors(small)["spec.entrypoint.builtin.layers"]


def test_job_resources_win_over_runtime_defaults() -> None:
    rt = {"pod": {"resources": {"cpu": "8", "memory": "64Gi"}}}
    assert (run(rt_patch=rt).pod.cpu, run(rt_patch=rt).pod.memory) == ("8", "64Gi")
    res = run({"resources": {"memory": "128Gi"}}, rt)
    assert (res.pod.cpu, res.pod.memory) == ("8", "128Gi")


def test_rendered_name_lengths_are_checked_for_the_generation() -> None:
    job = copy.deepcopy(MINIMAL_JOB)
    job["metadata"]["name"] = "a" * 48
    job["spec"]["nodes"] = 1000
    job["spec"]["parallelism"] = {"pipeline": 16, "data": 500}
    job["spec"]["entrypoint"] = {"module": {"name": "m:build"}}
    with pytest.raises(SpecError) as info:
        # 48 characters leave room for any rank and generations below 10**8.
        resolve(parse_job(job), parse_runtime(MINIMAL_RUNTIME), generation=10**9)
    assert info.value.paths() == ["metadata.name"]
    assert "pod name" in str(info.value)
    assert resolve(parse_job(job), parse_runtime(MINIMAL_RUNTIME), generation=10**7 - 1)
    assert "shorten the job name to at most" in str(info.value)


def test_smoke_gets_the_mounted_shm_size_and_rdma() -> None:
    res = run()
    assert res.config.smoke.shm_size_bytes == 16 << 30  # the runtime default, no memory limit
    assert (res.config.smoke.rdma_enabled, res.config.smoke.rdma_resource_name) == (False, None)
    # The kubelet caps a memory-backed emptyDir at the pod's memory limit.
    capped = run({"resources": {"memory": "8Gi"}}, {"pod": {"shmSize": "32Gi"}})
    assert capped.pod.shm_size == "32Gi" and capped.config.smoke.shm_size_bytes == 8 << 30
    roomy = run({"resources": {"memory": "512Gi"}}, {"pod": {"shmSize": "32Gi"}})
    assert roomy.config.smoke.shm_size_bytes == 32 << 30
    rdma = run(None, {"pod": {"rdma": {"enabled": True, "resourceName": "example.com/roce"}}})
    assert (rdma.config.smoke.rdma_enabled, rdma.config.smoke.rdma_resource_name) == (
        True,
        "example.com/roce",
    )
