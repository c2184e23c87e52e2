"""HyperFrameRuntime: the platform team's golden profile (cluster-scoped, short name hfr).

It pins the images, records their versions, holds the pod defaults that make multi-node GPU
training work (shm, GPU and RDMA resources, the NCCL/torch "golden parameter table"), the
smoke-gate policy, and which of those defaults a job may override.
"""

# spec_field() returns dataclasses.field(...) with metadata; ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Final, Literal, get_args

from hyperframe.api.fields import Rule, spec_field
from hyperframe.api.kube import EnvVar, Toleration

__all__ = [
    "DEVICE_CHECKS",
    "OVERRIDABLE",
    "DeviceCheck",
    "GangScheduling",
    "Overridable",
    "PodDefaults",
    "RdmaSpec",
    "ResourceDefaults",
    "RuntimeImages",
    "RuntimeSpec",
    "RuntimeStatus",
    "RuntimeVersions",
    "SmokePolicy",
]

DeviceCheck = Literal["visible", "memory", "matmul", "p2p"]
DEVICE_CHECKS: Final[tuple[str, ...]] = get_args(DeviceCheck)

Overridable = Literal[
    "image",
    "shmSize",
    "env",
    "tolerations",
    "nodeSelector",
    "schedulerName",
    "priorityClassName",
    "hostNetwork",
    "smoke.enabled",
    "smoke.minBusBandwidthGBps",
    "smoke.timeoutSeconds",
]
OVERRIDABLE: Final[tuple[str, ...]] = get_args(Overridable)


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeImages:
    """The layered images, pinned by digest so every node runs the same bits."""

    base: str = spec_field(
        "Base image (OS, CUDA, RDMA user space, Python), pinned by digest.",
        fmt="image-digest",
        max_length=512,
    )
    framework: str = spec_field(
        "Framework image (base + pinned torch + hyperframe-runtime); runs the smoke gate and the trainer.",
        fmt="image-digest",
        max_length=512,
    )
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = spec_field(
        "imagePullPolicy of both containers.", default="IfNotPresent"
    )
    allowed_prefixes: tuple[str, ...] = spec_field(
        'Where a job\'s own image (spec.image, allowed by "image" in allowedOverrides) may come '
        "from: a registry and repository path such as registry.example.com/ml/; an image matches "
        "a prefix that ends in /, : or @, or that is followed by one of them in the image name.",
        default=(),
        max_items=32,
        unique_items=True,
        max_length=512,
    )
    pull_secrets: tuple[str, ...] = spec_field(
        "Names of image pull secrets (in the job's namespace).", default=(), max_items=16, unique_items=True
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeVersions:
    """Versions recorded when the images were built (from the pin matrix), shown to users."""

    torch: str = spec_field("torch version, e.g. 2.13.0.", max_length=64)
    python: str = spec_field("Python version, e.g. 3.11.", max_length=64)
    cuda: str | None = spec_field("CUDA version; absent for CPU-only images.", default=None, max_length=64)
    nccl: str | None = spec_field("NCCL version; absent for CPU-only images.", default=None, max_length=64)


@dataclass(frozen=True, slots=True, kw_only=True)
class RdmaSpec:
    """RDMA (InfiniBand/RoCE) devices for GPUDirect; turning it on adds the IPC_LOCK capability."""

    enabled: bool = spec_field("Request RDMA devices and allow memory locking (IPC_LOCK).", default=False)
    resource_name: str = spec_field(
        "Extended resource of the RDMA device plugin.", default="rdma/ib", fmt="resource-name", max_length=253
    )
    count: int = spec_field("RDMA devices per pod.", default=1, minimum=1, maximum=64)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceDefaults:
    """Per-node CPU and memory; the trainer container requests them (memory also as limit)."""

    cpu: str | None = spec_field("CPU request, e.g. 32 or 500m.", default=None, fmt="quantity")
    memory: str | None = spec_field("Memory request and limit, e.g. 256Gi.", default=None, fmt="quantity")


@dataclass(frozen=True, slots=True, kw_only=True)
class PodDefaults:
    """Defaults for every training pod."""

    shm_size: str = spec_field(
        "Size of the memory-backed /dev/shm (the container default of 64Mi starves DataLoader workers "
        "and NCCL).",
        default="16Gi",
        fmt="quantity",
    )
    gpu_resource_name: str = spec_field(
        "Extended resource that exposes GPUs.", default="nvidia.com/gpu", fmt="resource-name", max_length=253
    )
    rdma: RdmaSpec = spec_field("RDMA devices.", default_factory=RdmaSpec)
    host_network: bool = spec_field(
        "Run pods in the host network namespace (some RoCE fabrics need it).", default=False
    )
    env: tuple[EnvVar, ...] = spec_field(
        "The golden NCCL/torch environment, e.g. NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_IB_GID_INDEX, "
        "NCCL_NET_GDR_LEVEL, TORCH_NCCL_ASYNC_ERROR_HANDLING.",
        default=(),
        max_items=128,
        map_keys=("name",),
    )
    tolerations: tuple[Toleration, ...] = spec_field("Tolerations of every pod.", default=(), max_items=32)
    node_selector: Mapping[str, str] = spec_field(
        "Node selector of every pod.", default_factory=dict, max_items=32
    )
    scheduler_name: str | None = spec_field("schedulerName of every pod.", default=None, max_length=253)
    priority_class_name: str | None = spec_field(
        "priorityClassName of every pod.", default=None, fmt="dns-subdomain", max_length=253
    )
    resources: ResourceDefaults = spec_field(
        "Per-node CPU and memory when the job does not set spec.resources.", default_factory=ResourceDefaults
    )
    master_port: int = spec_field(
        "TCP port of the rendezvous (MASTER_PORT) on node rank 0.", default=29500, minimum=1024, maximum=65535
    )
    rendezvous_timeout_seconds: int = spec_field(
        "How long ranks wait for each other at rendezvous before failing with the missing ranks named.",
        default=900,
        minimum=10,
        maximum=86400,
    )
    run_as_user: int = spec_field(
        "UID of the containers when RDMA is off (they run as non-root); RDMA pods run as root with "
        "only IPC_LOCK added, because memory registration needs it. The framework images create uid "
        "10001 (images/matrix.yaml image_user).",
        default=10001,
        minimum=1,
        maximum=2147483647,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SmokePolicy:
    """The smoke gate: an init container that tests every device and a job-wide NCCL all-reduce."""

    enabled: bool = spec_field("Run the smoke gate before training.", default=True)
    device_checks: tuple[DeviceCheck, ...] = spec_field(
        "Per-GPU checks: visible (the visible GPU count equals gpusPerNode), memory (allocate "
        "memoryFraction, write and read back a pattern, time copies against "
        "minMemoryBandwidthGBps), matmul (fp32 result against a CPU reference, bf16 TFLOP/s "
        "against minMatmulTFLOPS), p2p (a verified copy to the next local GPU and back). Ignored "
        "by CPU jobs.",
        default=("visible", "memory", "matmul"),
        max_items=8,
        unique_items=True,
    )
    nccl_message_sizes: tuple[str, ...] = spec_field(
        "Message sizes of the job-wide all-reduce test (gloo on CPU jobs); the bus bandwidth of the "
        "largest is compared with minBusBandwidthGBps.",
        default=("1Mi", "64Mi"),
        min_items=1,
        max_items=16,
        fmt="quantity",
    )
    min_bus_bandwidth_gbps: float = spec_field(
        "Minimum all-reduce bus bandwidth (GB/s, busbw = algbw x 2(n-1)/n); 0 disables the threshold.",
        json="minBusBandwidthGBps",
        default=0.0,
        minimum=0,
        maximum=100000,
    )
    min_matmul_tflops: float = spec_field(
        "Minimum bf16 matmul TFLOP/s of every GPU (the matmul check, 8192x8192 bf16); 0 disables "
        "the threshold.",
        json="minMatmulTFLOPS",
        default=0.0,
        minimum=0,
        maximum=100000,
    )
    min_memory_bandwidth_gbps: float = spec_field(
        "Minimum device-to-device copy bandwidth of every GPU (GB/s, read + write, the memory "
        "check); 0 disables the threshold.",
        json="minMemoryBandwidthGBps",
        default=0.0,
        minimum=0,
        maximum=100000,
    )
    timeout_seconds: int = spec_field(
        "Time limit of the whole gate; on expiry it exits with the timeout code naming missing ranks.",
        default=300,
        minimum=10,
        maximum=7200,
    )
    memory_fraction: float = spec_field(
        "Fraction of each GPU's memory the memory check allocates.", default=0.8, minimum=0.01, maximum=0.99
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class GangScheduling:
    """Optional gang-scheduling objects; off by default."""

    pod_group: Literal["None", "SchedulerPlugins", "Volcano"] = spec_field(
        "Create a PodGroup with minMember = nodes: SchedulerPlugins (scheduling.x-k8s.io/v1alpha1, "
        "coscheduling plugin) or Volcano (scheduling.volcano.sh/v1beta1).",
        default="None",
    )
    schedule_timeout_seconds: int = spec_field(
        "scheduleTimeoutSeconds of a scheduler-plugins PodGroup.", default=300, minimum=1, maximum=86400
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeSpec:
    """spec of a HyperFrameRuntime."""

    __rules__: ClassVar[tuple[Rule, ...]] = (
        Rule(
            cel="!('image' in self.allowedOverrides) || size(self.images.allowedPrefixes) > 0",
            message="allowing jobs their own image needs images.allowedPrefixes",
            fix="list the registries and repositories jobs may use in images.allowedPrefixes, "
            "e.g. registry.example.com/ml/",
            field_path=".images.allowedPrefixes",
            reason="FieldValueRequired",
        ),
        Rule(
            cel="self.gang.podGroup != 'SchedulerPlugins' || has(self.pod.schedulerName)",
            message="a scheduler-plugins PodGroup only works with the coscheduling scheduler",
            fix="set pod.schedulerName to the scheduler-plugins scheduler (e.g. scheduler-plugins-scheduler)",
            field_path=".pod.schedulerName",
            reason="FieldValueRequired",
        ),
        Rule(
            cel="self.accelerator != 'cpu' || !self.pod.rdma.enabled",
            message="a cpu profile cannot enable RDMA",
            fix="set pod.rdma.enabled: false or accelerator: nvidia-gpu",
            field_path=".pod.rdma.enabled",
        ),
    )

    accelerator: Literal["nvidia-gpu", "cpu"] = spec_field(
        "What the profile runs on. cpu profiles serve CPU jobs (gpusPerNode 0, gloo) only.",
        default="nvidia-gpu",
    )
    images: RuntimeImages = spec_field("The pinned images.")
    versions: RuntimeVersions = spec_field("Versions inside the images.")
    pod: PodDefaults = spec_field("Pod defaults.", default_factory=PodDefaults)
    smoke: SmokePolicy = spec_field("Smoke-gate policy.", default_factory=SmokePolicy)
    gang: GangScheduling = spec_field("Gang scheduling.", default_factory=GangScheduling)
    allowed_overrides: tuple[Overridable, ...] = spec_field(
        "Which defaults a job may override in spec.runtimeOverrides (and image: spec.image, a job's "
        "own image under images.allowedPrefixes); anything else is rejected.",
        default=(),
        max_items=16,
        unique_items=True,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeStatus:
    """status of a HyperFrameRuntime (informational)."""

    observed_generation: int | None = spec_field("Last generation the operator saw.", default=None, minimum=0)
    message: str | None = spec_field("Human-readable note from the operator.", default=None, max_length=4096)
