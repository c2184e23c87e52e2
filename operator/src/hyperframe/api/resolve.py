"""Resolve a job against its runtime: runtime defaults, then the job overrides the runtime allows.

This is where rules that need *both* objects live (the API server cannot check them): an
override the runtime forbids, a user env name that shadows the runtime's golden table, a GPU
job on a CPU profile, a built-in model too shallow for the pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from hyperframe.api.builtin_models import BUILTIN_MODELS
from hyperframe.api.codec import dump
from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.job import BuiltinModel, Frames, JobSpec, procs_per_node
from hyperframe.api.job_rules import RESERVED_MOUNT_PATHS, checkpoint_of
from hyperframe.api.kube import EnvVar, Toleration
from hyperframe.api.models import HyperFrameJob, HyperFrameRuntime
from hyperframe.api.names import check_name_lengths, master_addr
from hyperframe.api.pod_rules import pod_field_errors
from hyperframe.api.quantity import quantity_bytes
from hyperframe.api.resolved import (
    JobIdentity,
    Rendezvous,
    ResolvedBuiltin,
    ResolvedEntrypoint,
    ResolvedFrames,
    ResolvedJobConfig,
    ResolvedSmoke,
)
from hyperframe.api.runtime import GangScheduling, RdmaSpec, RuntimeImages, RuntimeSpec
from hyperframe.version import OPERATOR_DISTRIBUTION, distribution_version

__all__ = [
    "GRACE_SECONDS",
    "GRACE_SECONDS_CHECKPOINTING",
    "PodSettings",
    "Resolution",
    "image_matches",
    "metrics_dir",
    "resolve",
    "stages_per_rank",
    "termination_grace_period",
]

DEFAULT_NAMESPACE = "default"
GRACE_SECONDS: Final = 30
"""terminationGracePeriodSeconds of a job without checkpoints (the Kubernetes default)."""
GRACE_SECONDS_CHECKPOINTING: Final = 120
"""terminationGracePeriodSeconds of a job with ``frames.checkpoint``: time to finish the running
frame and write its snapshot after SIGTERM."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PodSettings:
    """Pod-level settings after overrides; the renderer's input besides the config."""

    shm_size: str
    gpu_resource_name: str
    rdma: RdmaSpec
    host_network: bool
    env: tuple[EnvVar, ...]
    """Runtime golden env (with overrides) followed by the job's own env."""
    tolerations: tuple[Toleration, ...]
    node_selector: Mapping[str, str]
    scheduler_name: str | None
    priority_class_name: str | None
    cpu: str | None
    memory: str | None
    run_as_user: int
    images: RuntimeImages
    image: str
    """The image of both containers: the job's spec.image, else the runtime's framework image."""
    gang: GangScheduling


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolution:
    config: ResolvedJobConfig
    pod: PodSettings


def stages_per_rank(policy: str) -> int:
    """Model stages per rank: 1 for gpipe and 1f1b; 2 for the looped/V-shaped schedules
    (interleaved1f1b, zbv) and for hyperframe, which uses the V-shape placement."""
    return 1 if policy in ("gpipe", "1f1b") else 2


def metrics_dir(frames: Frames, job_name: str) -> str:
    """frames.metrics.dir, or ``<checkpoint.path>/metrics/<job name>`` on the checkpoint volume;
    "" (no files) without either."""
    if frames.metrics.dir:
        return frames.metrics.dir
    if frames.checkpoint is not None:
        return f"{frames.checkpoint.path.rstrip('/')}/metrics/{job_name}"
    return ""


def termination_grace_period(spec: JobSpec) -> int:
    """The pods' terminationGracePeriodSeconds: ``runPolicy.terminationGracePeriodSeconds``, else
    :data:`GRACE_SECONDS_CHECKPOINTING` with checkpoints and :data:`GRACE_SECONDS` without."""
    if spec.run_policy.termination_grace_period_seconds is not None:
        return spec.run_policy.termination_grace_period_seconds
    return GRACE_SECONDS_CHECKPOINTING if checkpoint_of(spec) is not None else GRACE_SECONDS


def _override_errors(spec: JobSpec, runtime_name: str, rt: RuntimeSpec) -> list[FieldError]:
    """One error per override the runtime does not allow."""
    set_fields: list[str] = []
    overrides = dump(spec.runtime_overrides)
    for key, value in overrides.items():
        if key == "smoke":
            set_fields.extend(f"smoke.{k}" for k in value)
        else:
            set_fields.append(key)
    return [
        FieldError(
            f"spec.runtimeOverrides.{key}",
            f'HyperFrameRuntime "{runtime_name}" does not allow overriding {key}',
            f'remove it, or ask the platform team to add "{key}" to spec.allowedOverrides of "{runtime_name}"',
        )
        for key in set_fields
        if key not in rt.allowed_overrides
    ]


def image_matches(image: str, prefix: str) -> bool:
    """Whether ``image`` is under ``prefix``: it starts with it, at a boundary of the name (so
    registry.example.com/ml does not admit registry.example.com/ml-other/...)."""
    if not prefix or not image.startswith(prefix):
        return False
    return prefix[-1] in "/:@" or image[len(prefix) : len(prefix) + 1] in ("/", ":", "@")


def _image_errors(spec: JobSpec, runtime_name: str, rt: RuntimeSpec) -> list[FieldError]:
    if spec.image is None:
        return []
    if "image" not in rt.allowed_overrides:
        return [
            FieldError(
                "spec.image",
                f'HyperFrameRuntime "{runtime_name}" does not allow jobs their own image',
                "remove spec.image to run the runtime's framework image, or ask the platform team to "
                f'add "image" to spec.allowedOverrides of "{runtime_name}"',
            )
        ]
    if any(image_matches(spec.image, p) for p in rt.images.allowed_prefixes):
        return []
    allowed = ", ".join(rt.images.allowed_prefixes)
    return [
        FieldError(
            "spec.image",
            f'{spec.image.split("@", 1)[0]} is not under an allowed prefix of HyperFrameRuntime "{runtime_name}" ({allowed})',
            "push the image under one of them (hyperframe image build --tag), or ask the platform team to "
            f'add its repository to spec.images.allowedPrefixes of "{runtime_name}"',
        )
    ]


def _merge_env(base: tuple[EnvVar, ...], extra: tuple[EnvVar, ...]) -> tuple[EnvVar, ...]:
    replaced = {e.name: e for e in extra}
    merged = [replaced.pop(e.name, e) for e in base]
    merged.extend(e for e in extra if e.name in replaced)
    return tuple(merged)


def _env_errors(spec: JobSpec, runtime_name: str, golden: tuple[EnvVar, ...]) -> list[FieldError]:
    names = {e.name for e in golden}
    return [
        FieldError(
            f"spec.env[{i}].name",
            f'{e.name} is set by HyperFrameRuntime "{runtime_name}" (its golden NCCL/torch table)',
            "remove it, or set it in spec.runtimeOverrides.env if the runtime allows overriding env",
        )
        for i, e in enumerate(spec.env)
        if e.name in names
    ]


def _builtin(spec: JobSpec, b: BuiltinModel, errors: list[FieldError]) -> ResolvedBuiltin:
    preset = BUILTIN_MODELS[b.model]
    resolved = ResolvedBuiltin(
        model=b.model,
        layers=b.layers or preset.layers,
        hidden_size=b.hidden_size or preset.hidden_size,
        heads=b.heads or preset.heads,
        vocab_size=b.vocab_size or preset.vocab_size,
        seq_len=b.seq_len or preset.seq_len,
    )
    path = "spec.entrypoint.builtin"
    if resolved.hidden_size % resolved.heads:
        errors.append(
            FieldError(
                f"{path}.heads",
                f"heads ({resolved.heads}) does not divide hiddenSize ({resolved.hidden_size})",
                "choose heads that divides hiddenSize",
            )
        )
    if spec.parallelism is None or spec.frames is None:
        return resolved  # refused by the spec's own rules (builtin entrypoints need both)
    stages = spec.parallelism.pipeline * stages_per_rank(spec.frames.schedule_policy)
    if resolved.layers < stages:
        errors.append(
            FieldError(
                f"{path}.layers",
                f"{resolved.layers} layers cannot fill pipeline ({spec.parallelism.pipeline}) "
                f"x {stages_per_rank(spec.frames.schedule_policy)} stage(s) per rank for "
                f"{spec.frames.schedule_policy} = {stages} stages",
                f"set layers to at least {stages} (one per stage)",
            )
        )
    return resolved


def _resolved_frames(f: Frames, job_name: str) -> ResolvedFrames:
    return ResolvedFrames(
        frames=f.frames,
        micro_batches_per_frame=f.micro_batches_per_frame,
        micro_batch_size=f.micro_batch_size,
        schedule_policy=f.schedule_policy,
        replan_every_frames=f.replan_every_frames,
        stages_per_rank=stages_per_rank(f.schedule_policy),
        layer_split=f.layer_split,
        checkpoint=f.checkpoint,
        metrics_dir=metrics_dir(f, job_name),
    )


def _mounted_shm_bytes(shm_size: str, memory_limit: str | None) -> int:
    """What the kubelet mounts at /dev/shm: the memory emptyDir's sizeLimit, capped by the pod's
    memory limit (both containers carry the same limit, so it is the pod's)."""
    size = quantity_bytes(shm_size)
    return min(size, quantity_bytes(memory_limit)) if memory_limit else size


def resolve(job: HyperFrameJob, runtime: HyperFrameRuntime, *, generation: int = 0) -> Resolution:
    """Apply the runtime's defaults and the job's allowed overrides; SpecError lists every problem.

    The runtime is the one given: callers pick it by ``spec.runtimeRef.name`` (the operator and
    ``hyperframe render`` do), or deliberately try a job against another profile; the resolved
    config records which one (``runtimeName``).
    """
    spec, rt, rt_name = job.spec, runtime.spec, runtime.metadata.name
    namespace = job.metadata.namespace or DEFAULT_NAMESPACE
    errors: list[FieldError] = []
    if rt.accelerator == "cpu" and spec.gpus_per_node > 0:
        errors.append(
            FieldError(
                "spec.gpusPerNode",
                f'{spec.gpus_per_node} GPUs per node, but HyperFrameRuntime "{rt_name}" is a cpu profile',
                "set gpusPerNode: 0 with procsPerNode, or use a GPU runtime",
            )
        )
    errors.extend(check_name_lengths(job.metadata.name, spec.nodes, generation))
    errors.extend(_override_errors(spec, rt_name, rt))
    errors.extend(_image_errors(spec, rt_name, rt))
    errors.extend(_env_errors(spec, rt_name, rt.pod.env))
    errors.extend(pod_field_errors(spec, rt, RESERVED_MOUNT_PATHS))
    builtin = _builtin(spec, spec.entrypoint.builtin, errors) if spec.entrypoint.builtin else None
    if errors:
        raise SpecError(errors)

    ov = spec.runtime_overrides
    smoke_ov = ov.smoke
    gpu = spec.gpus_per_node > 0
    procs = procs_per_node(spec)
    shm_size = ov.shm_size or rt.pod.shm_size
    memory = spec.resources.memory or rt.pod.resources.memory
    rdma = rt.pod.rdma
    smoke = ResolvedSmoke(
        enabled=smoke_ov.enabled if smoke_ov and smoke_ov.enabled is not None else rt.smoke.enabled,
        device_checks=rt.smoke.device_checks if gpu else (),
        nccl_message_sizes=tuple(quantity_bytes(s) for s in rt.smoke.nccl_message_sizes),
        min_bus_bandwidth_gbps=smoke_ov.min_bus_bandwidth_gbps
        if smoke_ov and smoke_ov.min_bus_bandwidth_gbps is not None
        else rt.smoke.min_bus_bandwidth_gbps,
        timeout_seconds=smoke_ov.timeout_seconds
        if smoke_ov and smoke_ov.timeout_seconds is not None
        else rt.smoke.timeout_seconds,
        memory_fraction=rt.smoke.memory_fraction,
        min_matmul_tflops=rt.smoke.min_matmul_tflops,
        min_memory_bandwidth_gbps=rt.smoke.min_memory_bandwidth_gbps,
        shm_size_bytes=_mounted_shm_bytes(shm_size, memory),
        rdma_enabled=rdma.enabled,
        rdma_resource_name=rdma.resource_name if rdma.enabled else None,
    )
    image = spec.image or rt.images.framework
    config = ResolvedJobConfig(
        job=JobIdentity(name=job.metadata.name, namespace=namespace, uid=job.metadata.uid),
        runtime_name=rt_name,
        nodes=spec.nodes,
        gpus_per_node=spec.gpus_per_node,
        procs_per_node=procs,
        world_size=spec.nodes * procs,
        backend="nccl" if gpu else "gloo",
        parallelism=spec.parallelism,
        frames=_resolved_frames(spec.frames, job.metadata.name) if spec.frames is not None else None,
        entrypoint=ResolvedEntrypoint(
            builtin=builtin, module=spec.entrypoint.module, script=spec.entrypoint.script
        ),
        data=spec.data,
        training=spec.training,
        rendezvous=Rendezvous(
            master_addr=master_addr(job.metadata.name, namespace),
            master_port=rt.pod.master_port,
            timeout_seconds=rt.pod.rendezvous_timeout_seconds,
        ),
        smoke=smoke,
        termination_grace_period_seconds=termination_grace_period(spec),
        images=rt.images,
        versions=rt.versions,
        image=image,
        runtime_version=distribution_version(OPERATOR_DISTRIBUTION) or "",
    )
    pod = PodSettings(
        shm_size=shm_size,
        gpu_resource_name=rt.pod.gpu_resource_name,
        rdma=rdma,
        host_network=ov.host_network if ov.host_network is not None else rt.pod.host_network,
        env=_merge_env(rt.pod.env, ov.env or ()) + spec.env,
        tolerations=ov.tolerations if ov.tolerations is not None else rt.pod.tolerations,
        node_selector=ov.node_selector if ov.node_selector is not None else rt.pod.node_selector,
        scheduler_name=ov.scheduler_name or rt.pod.scheduler_name,
        priority_class_name=ov.priority_class_name or rt.pod.priority_class_name,
        cpu=spec.resources.cpu or rt.pod.resources.cpu,
        memory=memory,
        run_as_user=rt.pod.run_as_user,
        images=rt.images,
        image=image,
        gang=rt.gang,
    )
    return Resolution(config=config, pod=pod)
