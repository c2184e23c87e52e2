"""HyperFrameJob spec (namespaced, short name hfj): what the ML engineer writes.

Cross-field rules live next to the fields as :class:`~hyperframe.api.fields.Rule` objects, in CEL:
the API server enforces them from the CRD, and ``hyperframe render`` evaluates the same schema.
"""

# spec_field() returns dataclasses.field(...) with metadata; ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal

from hyperframe.api.builtin_models import BuiltinName
from hyperframe.api.fields import Rule, spec_field
from hyperframe.api.job_rules import (
    JOB_SPEC_RULES,
    POLICIES_NEEDING_DEPTH,
    RESERVED_MOUNT_PATHS,
    RESERVED_VOLUME_PREFIX,
    procs_per_node,
)
from hyperframe.api.kube import EnvVar, Toleration, VolumeMount
from hyperframe.api.training import TRAINING_JOB_RULES, Training

__all__ = [
    "JOB_NAME_PATTERN",
    "MAX_JOB_NAME_LENGTH",
    "POLICIES_NEEDING_DEPTH",
    "RESERVED_MOUNT_PATHS",
    "RESERVED_VOLUME_PREFIX",
    "SCHEDULE_POLICIES",
    "BuiltinModel",
    "Checkpoint",
    "DataSource",
    "Entrypoint",
    "Frames",
    "JobSpec",
    "LayerSplit",
    "NodeResources",
    "Parallelism",
    "RunPolicy",
    "RuntimeOverrides",
    "RuntimeRef",
    "SchedulePolicy",
    "Script",
    "SmokeOverrides",
    "Training",
    "UserModule",
    "procs_per_node",
]

# Rendered names add "-g<generation>-<rank>" (pod) and "-<rank>" (hostname) to the job name and
# must stay DNS labels (<= 63 characters): 48 leaves room for 4-digit ranks and 7-digit generations.
MAX_JOB_NAME_LENGTH: Final = 48
# The job name is also the headless Service name, so it must be a DNS-1035 label.
JOB_NAME_PATTERN: Final = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"

SchedulePolicy = Literal["hyperframe", "gpipe", "1f1b", "interleaved1f1b", "zbv"]
LayerSplit = Literal["auto", "even", "measured"]
SCHEDULE_POLICIES: Final[tuple[str, ...]] = ("hyperframe", "gpipe", "1f1b", "interleaved1f1b", "zbv")


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeRef:
    """Which HyperFrameRuntime (cluster-scoped) supplies the images and pod defaults."""

    name: str = spec_field("Name of the HyperFrameRuntime.", fmt="dns-subdomain", max_length=253)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeResources:
    """CPU and memory per node (per pod); unset values come from the runtime."""

    cpu: str | None = spec_field("CPU request per node, e.g. 32.", default=None, fmt="quantity")
    memory: str | None = spec_field(
        "Memory request and limit per node, e.g. 512Gi.", default=None, fmt="quantity"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Parallelism:
    """The parallel layout; pipeline x data must equal the number of ranks."""

    pipeline: int = spec_field("Pipeline stages (ranks per pipeline).", minimum=1, maximum=512)
    data: int = spec_field("Data-parallel replicas of the pipeline.", default=1, minimum=1, maximum=65536)


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """Checkpoint at frame boundaries into a volume of spec.volumes."""

    every_frames: int = spec_field("Save every N frames (and after the last).", minimum=1, maximum=1000000)
    volume: str = spec_field(
        "Name of a volume in spec.volumes to write into.", fmt="dns-label", max_length=63
    )
    path: str = spec_field(
        "Where that volume is mounted in the trainer.",
        default="/checkpoints",
        fmt="absolute-path",
        max_length=4096,
    )
    keep: int = spec_field(
        "Complete snapshots to keep in the job's folder (<path>/<job name>-<job uid>/); older "
        "complete ones are deleted after each save. The newest complete snapshot and any "
        "snapshot still being written are never deleted.",
        default=3,
        minimum=1,
        maximum=1000000,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Metrics:
    """Where rank 0 writes the observability files, appended every frame."""

    dir: str | None = spec_field(
        "Directory for TensorBoard event files (tensorboard/), metrics.jsonl, ops.jsonl and the "
        "Chrome trace (trace.json); absent: <checkpoint.path>/metrics/<job name> when checkpoint "
        "is set, none otherwise. Put it on a volume of spec.volumes to keep the files.",
        default=None,
        fmt="absolute-path",
        max_length=4096,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Frames:
    """Training in frames: a frame is one schedule of micro-batches ending in an optimizer step."""

    __rules__: ClassVar[tuple[Rule, ...]] = (
        Rule(
            cel="self.layerSplit != 'measured' || self.schedulePolicy != 'interleaved1f1b'",
            message="layerSplit measured splits for one stage per rank or a V, not interleaved1f1b's loop",
            fix="use layerSplit even with interleaved1f1b, or another schedulePolicy",
        ),
    )

    frames: int = spec_field("Number of frames (optimizer steps) to train.", minimum=1, maximum=100000000)
    micro_batches_per_frame: int = spec_field("Micro-batches per frame.", default=8, minimum=1, maximum=4096)
    micro_batch_size: int = spec_field("Samples per micro-batch.", default=1, minimum=1, maximum=65536)
    schedule_policy: SchedulePolicy = spec_field(
        "Pipeline schedule: hyperframe (cost-model planner, re-planned between frames) or one of "
        "torch's gpipe, 1f1b, interleaved1f1b, zbv.",
        default="hyperframe",
    )
    replan_every_frames: int = spec_field(
        "hyperframe policy: re-plan from measured costs every N frames; 0 never re-plans.",
        default=1,
        minimum=0,
        maximum=1000000,
    )
    layer_split: LayerSplit = spec_field(
        "How the model's layers are split over the pipeline stages: auto (the default: measured "
        "under the hyperframe schedulePolicy with replanEveryFrames above 0 on 2 or more pipeline "
        "ranks and a model with the per-layer hook, even otherwise), even (as evenly as they go) "
        "or measured (the first 4 frames time every op, then the layers are re-split by measured "
        "per-layer costs and rank speeds so that the ranks' loads balance, where that is predicted "
        "at least 10% faster; on one stage per rank, 4 more frames on the new split tell a heavy "
        "embedding or head from a slow rank; for a large vocabulary or mixed hardware; needs a "
        "model with the per-layer hook, which the built-in ones have).",
        default="auto",
    )
    checkpoint: Checkpoint | None = spec_field("Checkpointing; absent means no checkpoints.", default=None)
    metrics: Metrics = spec_field(
        "Observability files (TensorBoard, metrics, trace).", default_factory=Metrics
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class BuiltinModel:
    """A built-in example model; size parameters default to the preset."""

    model: BuiltinName = spec_field("Preset: tiny-gpt, gpt-small or gpt-medium.")
    layers: int | None = spec_field("Transformer blocks.", default=None, minimum=1, maximum=1024)
    hidden_size: int | None = spec_field("Hidden width.", default=None, minimum=8, maximum=65536)
    heads: int | None = spec_field(
        "Attention heads; must divide hiddenSize.", default=None, minimum=1, maximum=1024
    )
    vocab_size: int | None = spec_field("Vocabulary size.", default=None, minimum=2, maximum=1048576)
    seq_len: int | None = spec_field("Sequence length.", default=None, minimum=1, maximum=1048576)


@dataclass(frozen=True, slots=True, kw_only=True)
class UserModule:
    """The user's model factory, importable in the job's image (spec.image, e.g. from `hyperframe image build`) or from a mounted volume on PYTHONPATH."""

    name: str = spec_field(
        "The model factory as module:function, called as function(config): it returns a "
        "hyperframe_runtime.models.TorchModel (an ordinary torch module and where it may be cut; "
        "the runtime cuts it into pipeline stages), or a hand-split ModelSpec for advanced use. "
        "hyperframe_runtime.models.hf:causal_lm is the Hugging Face causal-LM factory.",
        fmt="python-function",
        max_length=512,
    )
    args: Mapping[str, Any] = spec_field(
        "Free-form arguments of the factory (any JSON object); it reads them as config.model_args.",
        default_factory=dict,
    )
    seq_len: int = spec_field(
        "Tokens per sample: the window length of spec.data.shards, and what the factory reads as "
        "config.seq_len (a model's maximum positions must be at least this).",
        default=32,
        minimum=1,
        maximum=1048576,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Script:
    """A plain torchrun script in the job's image: exactly one of path or module, with args."""

    __rules__: ClassVar[tuple[Rule, ...]] = (
        Rule(
            cel="has(self.path) != has(self.module)",
            message="exactly one of path or module must be set",
            fix="keep either script.path (a file) or script.module (run as python -m)",
        ),
    )

    path: str | None = spec_field(
        "The script file, absolute or relative to the image's working directory (/workspace in "
        "images from `hyperframe image build`).",
        default=None,
        min_length=1,
        max_length=4096,
    )
    module: str | None = spec_field(
        "A module to run as with python -m (torchrun --module).",
        default=None,
        fmt="python-module-name",
        max_length=512,
    )
    args: tuple[str, ...] = spec_field(
        "Arguments after the script or module.", default=(), max_items=256, max_length=4096
    )


_ENTRYPOINT_ONE = "exactly one of builtin, module or script must be set"


@dataclass(frozen=True, slots=True, kw_only=True)
class Entrypoint:
    """What to train: exactly one of builtin, module or script."""

    __rules__: ClassVar[tuple[Rule, ...]] = (
        Rule(
            cel="[has(self.builtin), has(self.module), has(self.script)].filter(x, x).size() == 1",
            message=_ENTRYPOINT_ONE,
            fix="keep one of entrypoint.builtin, entrypoint.module or entrypoint.script",
        ),
    )

    builtin: BuiltinModel | None = spec_field("A built-in example model.", default=None)
    module: UserModule | None = spec_field("A user module.", default=None)
    script: Script | None = spec_field(
        "A plain torchrun script (DDP, FSDP, ...) from the job's image: it runs under torchrun with "
        "the job's rendezvous and environment after the smoke gate, trains in its own loop (no "
        "spec.frames, spec.parallelism or spec.data) and reports progress with "
        "hyperframe_runtime.report().",
        default=None,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DataSource:
    """What the model trains on: exactly one of shards or factory (docs/runtime.md, "Your data")."""

    __rules__: ClassVar[tuple[Rule, ...]] = (
        Rule(
            cel="has(self.shards) != has(self.factory)",
            message="exactly one of shards or factory must be set",
            fix="keep either data.shards or data.factory",
        ),
    )

    shards: str | None = spec_field(
        "Directory of token shards (written by `hyperframe data prepare`) in a volume mounted "
        "through spec.volumeMounts; the built-in model needs every token below its vocabSize.",
        default=None,
        fmt="absolute-path",
        max_length=4096,
    )
    factory: str | None = spec_field(
        "package.module:function; function(config) returns a map-style torch Dataset whose items "
        "are (inputs, targets) tensors.",
        default=None,
        fmt="python-function",
        max_length=512,
    )
    num_workers: int = spec_field(
        "DataLoader worker processes per rank reading ahead; 0 reads in the trainer, inside the frame.",
        default=2,
        minimum=0,
        maximum=64,
    )
    prefetch_factor: int = spec_field(
        "Micro-batches each worker keeps in flight.", default=2, minimum=1, maximum=64
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPolicy:
    """Lifecycle policy (same names as Kubeflow's runPolicy)."""

    backoff_limit: int = spec_field(
        "Gang restarts allowed before the job fails.", default=3, minimum=0, maximum=1000
    )
    active_deadline_seconds: int | None = spec_field(
        "Fail the job when it has run this long (from start, restarts included).", default=None, minimum=1
    )
    ttl_seconds_after_finished: int | None = spec_field(
        "Delete the job this long after it finished; unset keeps it.", default=None, minimum=0
    )
    clean_pod_policy: Literal["All", "Running", "None"] = spec_field(
        "Which pods to delete when the job finishes: All, Running (still-running ones; finished pods "
        "stay for their logs) or None.",
        default="Running",
    )
    termination_grace_period_seconds: int | None = spec_field(
        "Seconds a pod gets after SIGTERM (preemption, node drain, deletion) to finish its frame, "
        "save a snapshot and exit as preempted; unset: 120 with frames.checkpoint, 30 without.",
        default=None,
        minimum=10,
        maximum=86400,
    )
    suspend: bool = spec_field(
        "Suspended jobs have no pods; set to false to (re)start. The user's switch: Kueue admits through spec.queueName, not this field.",
        default=False,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SmokeOverrides:
    """Job-level smoke-gate overrides (each must be allowed by the runtime)."""

    enabled: bool | None = spec_field("Overrides smoke.enabled.", default=None)
    min_bus_bandwidth_gbps: float | None = spec_field(
        "Overrides smoke.minBusBandwidthGBps.",
        json="minBusBandwidthGBps",
        default=None,
        minimum=0,
        maximum=100000,
    )
    timeout_seconds: int | None = spec_field(
        "Overrides smoke.timeoutSeconds.", default=None, minimum=10, maximum=7200
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeOverrides:
    """Overrides of the runtime's pod defaults; each must be listed in the runtime's allowedOverrides."""

    shm_size: str | None = spec_field("Overrides pod.shmSize.", default=None, fmt="quantity")
    env: tuple[EnvVar, ...] | None = spec_field(
        "Entries replacing (by name) or adding to pod.env.", default=None, max_items=128, map_keys=("name",)
    )
    tolerations: tuple[Toleration, ...] | None = spec_field(
        "Replaces pod.tolerations.", default=None, max_items=32
    )
    node_selector: Mapping[str, str] | None = spec_field(
        "Replaces pod.nodeSelector.", default=None, max_items=32
    )
    scheduler_name: str | None = spec_field("Overrides pod.schedulerName.", default=None, max_length=253)
    priority_class_name: str | None = spec_field(
        "Overrides pod.priorityClassName.", default=None, fmt="dns-subdomain", max_length=253
    )
    host_network: bool | None = spec_field("Overrides pod.hostNetwork.", default=None)
    smoke: SmokeOverrides | None = spec_field("Smoke-gate overrides.", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    """spec of a HyperFrameJob."""

    __rules__: ClassVar[tuple[Rule, ...]] = (*JOB_SPEC_RULES, *TRAINING_JOB_RULES)

    runtime_ref: RuntimeRef = spec_field("The HyperFrameRuntime to use.", immutable=True)
    image: str | None = spec_field(
        "The job's own trainer image, built FROM the runtime's framework image (`hyperframe image "
        'build`), pinned by digest; it runs the smoke gate and the trainer. Needs "image" in the '
        "runtime's allowedOverrides and a name under its images.allowedPrefixes; absent: the "
        "runtime's framework image.",
        default=None,
        fmt="image-digest",
        max_length=512,
    )
    nodes: int = spec_field("Number of nodes (one pod per node).", minimum=1, maximum=4096, immutable=True)
    gpus_per_node: int = spec_field(
        "GPUs per node; 0 makes a CPU job (gloo), which then needs procsPerNode.",
        minimum=0,
        maximum=64,
        immutable=True,
    )
    procs_per_node: int | None = spec_field(
        "Ranks per node for CPU jobs; GPU jobs run one rank per GPU.",
        default=None,
        minimum=1,
        maximum=256,
        immutable=True,
    )
    parallelism: Parallelism | None = spec_field(
        "Parallel layout; required for builtin and module entrypoints, refused for scripts (a "
        "script lays out its own ranks).",
        default=None,
        immutable=True,
    )
    frames: Frames | None = spec_field(
        "Frames and schedule; required for builtin and module entrypoints, refused for scripts "
        "(a script runs its own loop).",
        default=None,
    )
    entrypoint: Entrypoint = spec_field("What to train.")
    data: DataSource | None = spec_field(
        "Training data; absent: the model's own batches (the built-in models: synthetic tokens).",
        default=None,
    )
    training: Training = spec_field(
        "The training recipe: optimizer, learning-rate schedule, clipping, seed, precision.",
        default_factory=Training,
    )
    resources: NodeResources = spec_field("CPU and memory per node.", default_factory=NodeResources)
    env: tuple[EnvVar, ...] = spec_field(
        "Extra environment for the trainer; names HyperFrame sets are rejected.",
        default=(),
        max_items=128,
        map_keys=("name",),
    )
    volumes: tuple[Mapping[str, Any], ...] = spec_field(
        "Pod volumes (core/v1 Volume, passed through), e.g. a PVC for checkpoints or data.",
        default=(),
        max_items=64,
        map_keys=("name",),
        raw_keys=("name",),
    )
    volume_mounts: tuple[VolumeMount, ...] = spec_field(
        "Mounts of those volumes in the trainer and smoke-gate containers.", default=(), max_items=64
    )
    run_policy: RunPolicy = spec_field("Lifecycle policy.", default_factory=RunPolicy)
    runtime_overrides: RuntimeOverrides = spec_field(
        "Overrides of the runtime's defaults, each allowed by the runtime's allowedOverrides.",
        default_factory=RuntimeOverrides,
    )
    queue_name: str | None = spec_field(
        "Kueue LocalQueue: opt-in; each gang generation's pods form a Kueue plain pod group, admitted or preempted as one workload.",
        default=None,
        fmt="dns-subdomain",
        max_length=253,
    )
