"""HyperFrameJob status: the schema the operator (issue 4) writes and users read.

Phases and condition types are typed constants here so the operator, the printer columns and
the docs share them. Condition ``type`` is a free string in the schema (validated by the
operator's typed constants) so a new condition never breaks status writes of an older CRD.
"""

# spec_field() returns dataclasses.field(...) with metadata; ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from hyperframe.api.fields import spec_field
from hyperframe.constants import MAX_PROGRESS_METRICS

__all__ = [
    "CONDITION_TYPES",
    "PHASES",
    "Condition",
    "DeviceResult",
    "GangCreation",
    "JobStatus",
    "NodeSmokeResult",
    "Phase",
    "Progress",
    "SmokeTestStatus",
]

Phase = Literal[
    "Pending", "Created", "SmokeTesting", "Running", "Restarting", "Suspended", "Succeeded", "Failed"
]
PHASES: Final[tuple[str, ...]] = (
    "Pending",
    "Created",
    "SmokeTesting",
    "Running",
    "Restarting",
    "Suspended",
    "Succeeded",
    "Failed",
)
CONDITION_TYPES: Final[tuple[str, ...]] = (
    "Created",
    "SmokeTesting",
    "SmokeTestPassed",
    "SmokeTestFailed",
    "Running",
    "Restarting",
    "Suspended",
    "Queued",
    "GangRefused",
    "Unschedulable",
    "Succeeded",
    "Failed",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Condition:
    """A standard Kubernetes condition."""

    type: str = spec_field("Condition type, e.g. Running or SmokeTestPassed.", max_length=316)
    status: Literal["True", "False", "Unknown"] = spec_field("True, False or Unknown.")
    reason: str | None = spec_field("CamelCase reason.", default=None, max_length=1024)
    message: str | None = spec_field("Human-readable detail.", default=None, max_length=32768)
    last_transition_time: str | None = spec_field("When status last changed.", default=None, fmt="date-time")
    observed_generation: int | None = spec_field(
        "Generation the condition was set for.", default=None, minimum=0
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceResult:
    """One GPU's smoke-test figures."""

    index: int = spec_field("Local device index.", minimum=0)
    name: str | None = spec_field("Device name, e.g. NVIDIA H100 80GB HBM3.", default=None, max_length=256)
    passed: bool = spec_field("Whether every device check passed.", default=True)
    figures: Mapping[str, float] = spec_field(
        "Measured figures by name, e.g. memoryGiB, matmulTflops.", default_factory=dict, max_items=32
    )
    message: str | None = spec_field("Failure detail.", default=None, max_length=4096)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSmokeResult:
    """One node's (pod's) smoke-gate result."""

    node: str = spec_field("Kubernetes node name.", max_length=253)
    rank: int = spec_field("Node rank.", minimum=0)
    gang_generation: int | None = spec_field(
        "Gang generation of the pod whose gate this is (entries of earlier generations stay).",
        default=None,
        minimum=0,
    )
    passed: bool = spec_field("Whether the gate passed on this node.")
    exit_code: int | None = spec_field("Exit code of the smoke-gate container.", default=None)
    reason: str | None = spec_field("Short reason, e.g. LowBusBandwidth.", default=None, max_length=256)
    message: str | None = spec_field("Detail (the termination message).", default=None, max_length=4096)
    bus_bandwidth_gbps: float | None = spec_field(
        "All-reduce bus bandwidth measured by this node's ranks, GB/s.", json="busBandwidthGBps", default=None
    )
    devices: tuple[DeviceResult, ...] = spec_field("Per-device results.", default=(), max_items=64)


@dataclass(frozen=True, slots=True, kw_only=True)
class SmokeTestStatus:
    """Smoke-gate results of the current gang generation."""

    gang_generation: int | None = spec_field("Generation these results belong to.", default=None, minimum=0)
    passed: bool | None = spec_field("Whether every node passed; absent while running.", default=None)
    bus_bandwidth_gbps: float | None = spec_field(
        "Job-wide all-reduce bus bandwidth, GB/s.", json="busBandwidthGBps", default=None
    )
    nodes: tuple[NodeSmokeResult, ...] = spec_field("Per-node results.", default=(), max_items=4096)


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """Live training progress, reported by rank 0 once per frame; once the job has finished, the
    trainer's final figures (from rank 0's termination message)."""

    frame: int = spec_field(
        "Frames completed; for a script job, the step it last reported.", default=0, minimum=0
    )
    total_frames: int = spec_field(
        "Frames to train; for a script job, the total_steps it reported (0 when it gave none).",
        default=0,
        minimum=0,
    )
    step: int = spec_field("Optimizer steps completed.", default=0, minimum=0)
    loss: float | None = spec_field("Loss of the last frame (or reported step).", default=None)
    samples_per_second: float | None = spec_field("Throughput of the last frame.", default=None, minimum=0)
    eta_seconds: float | None = spec_field("Estimated seconds to the last frame.", default=None, minimum=0)
    metrics: Mapping[str, float] | None = spec_field(
        "User-named metrics of the last frame (the model's frame_metrics): at most 64 names of at "
        "most 63 characters; the runtime drops the rest, with a warning in the trainer log.",
        default=None,
        max_items=MAX_PROGRESS_METRICS,
    )
    updated_at: str | None = spec_field(
        "When the operator received this update (or took the final one from the termination message).",
        default=None,
        fmt="date-time",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class GangCreation:
    """The creation of a gang generation in progress: written before the first pod of it is created."""

    gang_generation: int = spec_field("Gang generation whose pods are being created.", minimum=0)
    ranks: tuple[int, ...] = spec_field(
        "Ranks being created. An operator that takes over creates the ones still missing (same "
        "names) instead of restarting the gang.",
        default=(),
        max_items=4096,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStatus:
    """status of a HyperFrameJob; written only by the operator."""

    phase: Phase | None = spec_field("Lifecycle phase.", default=None)
    message: str | None = spec_field("Human-readable summary of the phase.", default=None, max_length=32768)
    conditions: tuple[Condition, ...] = spec_field(
        "Conditions: " + ", ".join(CONDITION_TYPES) + ".", default=(), max_items=32, map_keys=("type",)
    )
    observed_generation: int | None = spec_field(
        "Generation of the spec last acted on.", default=None, minimum=0
    )
    restarts: int = spec_field("Gang restarts so far.", default=0, minimum=0)
    create_refusals: int = spec_field(
        "Creations of the current gang the API server refused in a row (quota, admission); each one "
        "was rolled back. Reset to 0 once a whole gang exists.",
        default=0,
        minimum=0,
    )
    gang_generation: int = spec_field(
        "Current gang incarnation; pods carry it in the hyperframe.dev/gang-generation label.",
        default=0,
        minimum=0,
    )
    gang_creation: GangCreation | None = spec_field(
        "Set (before the first create) while the pods of a gang generation are being created; "
        "cleared by the first status write after the operator has seen every pod of it.",
        default=None,
    )
    excluded_nodes: tuple[str, ...] = spec_field(
        "Nodes kept out of this job because they failed the smoke gate.",
        default=(),
        max_items=4096,
        unique_items=True,
    )
    smoke_test: SmokeTestStatus | None = spec_field("Smoke-gate results.", default=None)
    progress: Progress | None = spec_field("Training progress.", default=None)
    start_time: str | None = spec_field("When the first pods were created.", default=None, fmt="date-time")
    completion_time: str | None = spec_field(
        "When the job succeeded or failed.", default=None, fmt="date-time"
    )
