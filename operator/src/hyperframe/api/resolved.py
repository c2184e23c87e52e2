"""ResolvedJobConfig: the fully resolved job the runtime reads in every pod.

The renderer writes it as JSON into the job's ConfigMap (key ``job.json``, mounted at
``/etc/hyperframe/job.json``); the smoke gate, the launcher and local mode read it back with
:meth:`ResolvedJobConfig.from_json`. Runtime defaults and allowed job overrides are already
applied, so the runtime never needs the HyperFrameRuntime object.
"""

# spec_field() returns dataclasses.field(...) with metadata; ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from hyperframe.api.codec import dump, parse
from hyperframe.api.fields import spec_field
from hyperframe.api.job import (
    Checkpoint,
    DataSource,
    LayerSplit,
    Parallelism,
    SchedulePolicy,
    Script,
    UserModule,
)
from hyperframe.api.runtime import DeviceCheck, RuntimeImages, RuntimeVersions
from hyperframe.api.training import Training

__all__ = [
    "SCHEMA_VERSION",
    "JobIdentity",
    "Rendezvous",
    "ResolvedBuiltin",
    "ResolvedEntrypoint",
    "ResolvedFrames",
    "ResolvedJobConfig",
    "ResolvedSmoke",
]

SCHEMA_VERSION: Final = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class JobIdentity:
    name: str = spec_field("Job name.")
    namespace: str = spec_field("Job namespace.")
    uid: str | None = spec_field("Job uid; absent when rendered without a cluster.", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedFrames:
    frames: int = spec_field("Number of frames (optimizer steps).", minimum=1)
    micro_batches_per_frame: int = spec_field("Micro-batches per frame.", minimum=1)
    micro_batch_size: int = spec_field("Samples per micro-batch.", minimum=1)
    schedule_policy: SchedulePolicy = spec_field("Pipeline schedule.")
    replan_every_frames: int = spec_field("Re-plan cadence (hyperframe policy); 0 never.", minimum=0)
    stages_per_rank: int = spec_field(
        "Model stages each rank holds: 1 for gpipe and 1f1b, 2 for interleaved1f1b, zbv and hyperframe.",
        minimum=1,
    )
    layer_split: LayerSplit = spec_field(
        "Layer split over the stages: auto, even or measured.", default="auto"
    )
    checkpoint: Checkpoint | None = spec_field("Checkpointing, if any.", default=None)
    metrics_dir: str = spec_field(
        "Directory of the observability files (frames.metrics.dir or its default); empty: none.",
        default="",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedBuiltin:
    model: str = spec_field("Preset name.")
    layers: int = spec_field("Transformer blocks.", minimum=1)
    hidden_size: int = spec_field("Hidden width.", minimum=1)
    heads: int = spec_field("Attention heads.", minimum=1)
    vocab_size: int = spec_field("Vocabulary size.", minimum=2)
    seq_len: int = spec_field("Sequence length.", minimum=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedEntrypoint:
    builtin: ResolvedBuiltin | None = spec_field("Built-in model with every size parameter.", default=None)
    module: UserModule | None = spec_field("User module and args.", default=None)
    script: Script | None = spec_field("A torchrun script and its args.", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rendezvous:
    master_addr: str = spec_field("Node rank 0's address (its stable DNS name in a cluster).")
    master_port: int = spec_field("Rendezvous TCP port.", minimum=1, maximum=65535)
    timeout_seconds: int = spec_field("How long ranks wait for each other.", minimum=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedSmoke:
    enabled: bool = spec_field("Whether the smoke gate runs.")
    device_checks: tuple[DeviceCheck, ...] = spec_field("Per-GPU checks; empty for CPU jobs.")
    nccl_message_sizes: tuple[int, ...] = spec_field("All-reduce message sizes in bytes.")
    min_bus_bandwidth_gbps: float = spec_field(
        "Minimum bus bandwidth, GB/s; 0 disables the threshold.", json="minBusBandwidthGBps"
    )
    min_matmul_tflops: float = spec_field(
        "Minimum bf16 matmul TFLOP/s per GPU; 0 disables the threshold.", json="minMatmulTFLOPS", default=0.0
    )
    min_memory_bandwidth_gbps: float = spec_field(
        "Minimum copy bandwidth per GPU, GB/s; 0 disables the threshold.",
        json="minMemoryBandwidthGBps",
        default=0.0,
    )
    timeout_seconds: int = spec_field("Time limit of the whole gate.")
    memory_fraction: float = spec_field("Fraction of GPU memory the memory check allocates.")
    shm_size_bytes: int = spec_field(
        "Bytes the kubelet mounts at /dev/shm: the pod's shmSize, or its memory limit where that is "
        "smaller (the kubelet caps a memory-backed emptyDir at it); 0 = not known.",
        default=0,
        minimum=0,
    )
    rdma_enabled: bool = spec_field("Whether the pods request RDMA devices.", default=False)
    rdma_resource_name: str | None = spec_field(
        "Extended resource of the RDMA devices; set when rdmaEnabled.", default=None
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedJobConfig:
    """Everything a rank needs to know about its job, defaults and overrides applied."""

    schema_version: int = spec_field("Format version of this file.", default=SCHEMA_VERSION)
    job: JobIdentity = spec_field("Which job this is.")
    runtime_name: str = spec_field("The HyperFrameRuntime it was resolved against.")
    nodes: int = spec_field("Nodes (pods).", minimum=1)
    gpus_per_node: int = spec_field("GPUs per node; 0 for CPU jobs.", minimum=0)
    procs_per_node: int = spec_field("Ranks per node (= gpusPerNode for GPU jobs).", minimum=1)
    world_size: int = spec_field("nodes x procsPerNode.", minimum=1)
    backend: Literal["nccl", "gloo"] = spec_field("torch.distributed backend: nccl for GPU, gloo for CPU.")
    parallelism: Parallelism | None = spec_field(
        "pipeline x data = worldSize; absent for scripts.", default=None
    )
    frames: ResolvedFrames | None = spec_field("Frames and schedule; absent for scripts.", default=None)
    entrypoint: ResolvedEntrypoint = spec_field("What to train.")
    data: DataSource | None = spec_field("Training data; absent: the model's own batches.", default=None)
    training: Training = spec_field("The training recipe (spec.training).", default_factory=Training)
    rendezvous: Rendezvous = spec_field("Where ranks meet.")
    smoke: ResolvedSmoke = spec_field("Smoke-gate policy.")
    termination_grace_period_seconds: int = spec_field(
        "The pods' terminationGracePeriodSeconds: how long the trainer has after SIGTERM.",
        default=30,
        minimum=1,
    )
    images: RuntimeImages = spec_field("Images of the runtime.")
    image: str = spec_field("The image both containers run: spec.image, else images.framework.", default="")
    runtime_version: str = spec_field(
        "The hyperframe-runtime version the operator expects in that image; the smoke gate and the "
        "launcher exit as a config error (2) when the image holds another. Empty: not checked.",
        default="",
    )
    versions: RuntimeVersions = spec_field("Versions in the images.")

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = dump(self)
        return result

    def to_json(self) -> str:
        """Stable, human-readable JSON (sorted keys) for the ConfigMap."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> ResolvedJobConfig:
        """Parse ``job.json``; raises SpecError naming the bad field (path prefix ``job.json``)."""
        return parse(cls, json.loads(text), path="job.json")
