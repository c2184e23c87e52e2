"""Every default of both kinds, as the parser applies it (the CRD schema carries the same ones)."""

from __future__ import annotations

from typing import Any

from hyperframe.api.models import parse_job, parse_runtime

DIGEST = "sha256:" + "0" * 64
MINIMAL_RUNTIME: dict[str, Any] = {
    "apiVersion": "hyperframe.dev/v1alpha1",
    "kind": "HyperFrameRuntime",
    "metadata": {"name": "rt"},
    "spec": {
        "images": {"base": f"b@{DIGEST}", "framework": f"f@{DIGEST}"},
        "versions": {"torch": "2.13.0", "python": "3.12"},
    },
}
MINIMAL_JOB: dict[str, Any] = {
    "apiVersion": "hyperframe.dev/v1alpha1",
    "kind": "HyperFrameJob",
    "metadata": {"name": "j"},
    "spec": {
        "runtimeRef": {"name": "rt"},
        "nodes": 2,
        "gpusPerNode": 8,
        "parallelism": {"pipeline": 16},
        "frames": {"frames": 10},
        "entrypoint": {"builtin": {"model": "gpt-small"}},
    },
}


def test_runtime_defaults() -> None:
    rt = parse_runtime(MINIMAL_RUNTIME).spec
    assert rt.accelerator == "nvidia-gpu"
    assert rt.images.pull_policy == "IfNotPresent" and rt.images.pull_secrets == ()
    assert rt.versions.cuda is None and rt.versions.nccl is None
    pod = rt.pod
    assert pod.shm_size == "16Gi"
    assert pod.gpu_resource_name == "nvidia.com/gpu"
    assert (pod.rdma.enabled, pod.rdma.resource_name, pod.rdma.count) == (False, "rdma/ib", 1)
    assert pod.host_network is False
    assert pod.env == () and pod.tolerations == () and dict(pod.node_selector) == {}
    assert pod.scheduler_name is None and pod.priority_class_name is None
    assert pod.resources.cpu is None and pod.resources.memory is None
    assert pod.master_port == 29500
    assert pod.rendezvous_timeout_seconds == 900
    assert pod.run_as_user == 10001
    smoke = rt.smoke
    assert smoke.enabled is True
    assert smoke.device_checks == ("visible", "memory", "matmul")
    assert smoke.nccl_message_sizes == ("1Mi", "64Mi")
    assert smoke.min_bus_bandwidth_gbps == 0.0
    assert smoke.timeout_seconds == 300
    assert smoke.memory_fraction == 0.8
    assert rt.gang.pod_group == "None" and rt.gang.schedule_timeout_seconds == 300
    assert rt.allowed_overrides == ()


def test_job_defaults() -> None:
    job = parse_job(MINIMAL_JOB)
    assert job.metadata.namespace is None and job.metadata.uid is None
    spec = job.spec
    assert spec.procs_per_node is None
    assert spec.parallelism.data == 1
    f = spec.frames
    assert (f.micro_batches_per_frame, f.micro_batch_size, f.schedule_policy) == (8, 1, "hyperframe")
    assert f.replan_every_frames == 1 and f.checkpoint is None
    assert spec.entrypoint.module is None
    b = spec.entrypoint.builtin
    assert b is not None and (b.layers, b.hidden_size, b.heads, b.vocab_size, b.seq_len) == (None,) * 5
    assert spec.resources.cpu is None and spec.resources.memory is None
    assert spec.env == () and spec.volumes == () and spec.volume_mounts == ()
    rp = spec.run_policy
    assert (rp.backoff_limit, rp.active_deadline_seconds, rp.ttl_seconds_after_finished) == (3, None, None)
    assert rp.clean_pod_policy == "Running" and rp.suspend is False
    ov = spec.runtime_overrides
    assert all(
        getattr(ov, name) is None
        for name in (
            "shm_size",
            "env",
            "tolerations",
            "node_selector",
            "scheduler_name",
            "priority_class_name",
        )
    )
    assert ov.host_network is None and ov.smoke is None
    assert spec.queue_name is None


def test_checkpoint_path_default() -> None:
    obj = {
        **MINIMAL_JOB,
        "spec": {
            **MINIMAL_JOB["spec"],
            "frames": {"frames": 10, "checkpoint": {"everyFrames": 5, "volume": "c"}},
            "volumes": [{"name": "c", "emptyDir": {}}],
        },
    }
    ckpt = parse_job(obj).spec.frames.checkpoint
    assert ckpt is not None and ckpt.path == "/checkpoints"


def test_status_is_kept_as_a_plain_mapping() -> None:
    job = parse_job({**MINIMAL_JOB, "status": {"phase": "Running", "anything": 1}})
    assert job.status == {"phase": "Running", "anything": 1}
