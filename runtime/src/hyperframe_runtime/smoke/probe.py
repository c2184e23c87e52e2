"""Device probes: the gate's per-device checks behind one small interface.

The gate core never asks "is this a test?": the CLI picks a probe and injects it. Real jobs get
:class:`~hyperframe_runtime.smoke.cuda_checks.CudaProbe` (CUDA) or :class:`SkippedProbe` (CPU).
:class:`SimulatedProbe` is a documented test hook (env ``HYPERFRAME_SMOKE_SIMULATE_MISSING_DEVICE``)
that lets CPU-only CI exercise the missing-device path end to end. Its node-level form,
``HYPERFRAME_SMOKE_SIMULATE_MISSING_DEVICE_FILE``, names a file that the node provides: the dev
cluster's real nodes show each pod their own fault files at one host path, so one node's gate
fails while the same job passes on another.

Probes are small frozen dataclasses so that they pickle into the spawned rank processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from hyperframe.smoke_report import DeviceFigures

from hyperframe_runtime.smoke.config import GateConfig, GateConfigError
from hyperframe_runtime.smoke.outcome import Failure

__all__ = [
    "ENV_SIMULATE_MISSING_DEVICE",
    "ENV_SIMULATE_MISSING_DEVICE_FILE",
    "DeviceOutcome",
    "DeviceProbe",
    "SimulatedProbe",
    "SkippedProbe",
    "select_probe",
]

ENV_SIMULATE_MISSING_DEVICE: Final = "HYPERFRAME_SMOKE_SIMULATE_MISSING_DEVICE"
"""Test hook: comma-separated local device indices to report as not visible."""
ENV_SIMULATE_MISSING_DEVICE_FILE: Final = "HYPERFRAME_SMOKE_SIMULATE_MISSING_DEVICE_FILE"
"""Test hook: a file holding what ENV_SIMULATE_MISSING_DEVICE would; a missing or empty file
simulates nothing. Read only where ENV_SIMULATE_MISSING_DEVICE is unset."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceOutcome:
    figures: DeviceFigures
    failure: Failure | None = None
    notes: tuple[str, ...] = ()


class DeviceProbe(Protocol):
    """Checks the device of one local rank; runs inside that rank's process."""

    def check(self, local_rank: int, config: GateConfig) -> DeviceOutcome: ...


@dataclass(frozen=True, slots=True)
class SkippedProbe:
    """CPU jobs: there is no device to check; say so in the report."""

    def check(self, local_rank: int, config: GateConfig) -> DeviceOutcome:
        return DeviceOutcome(
            figures=DeviceFigures(index=local_rank, name="cpu", node_rank=config.node_rank),
            notes=("device checks skipped: CPU job",),
        )


@dataclass(frozen=True, slots=True)
class SimulatedProbe:
    """Test hook: pretends to be a node whose devices ``missing`` are not visible."""

    missing: frozenset[int]

    def check(self, local_rank: int, config: GateConfig) -> DeviceOutcome:
        figures = DeviceFigures(index=local_rank, name="simulated", node_rank=config.node_rank)
        if local_rank not in self.missing:
            return DeviceOutcome(figures=figures, notes=("simulated device",))
        visible = config.nproc_per_node - len(self.missing & set(range(config.nproc_per_node)))
        return DeviceOutcome(
            figures=DeviceFigures(index=local_rank, name="simulated", ok=False, node_rank=config.node_rank),
            failure=Failure(
                reason_id="device.count",
                message=(
                    f"node {config.node_rank} ({config.node_name}) device {local_rank} is not visible: "
                    f"{visible} of {config.nproc_per_node} requested devices visible (simulated by "
                    f"{ENV_SIMULATE_MISSING_DEVICE})"
                ),
                suspect_node_ranks=(config.node_rank,),
            ),
        )


def _simulated_from_file(env: Mapping[str, str]) -> str:
    path = env.get(ENV_SIMULATE_MISSING_DEVICE_FILE, "").strip()
    if not path:
        return ""
    try:
        return Path(path).read_text().strip()
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise GateConfigError(
            "config.invalid", f"{ENV_SIMULATE_MISSING_DEVICE_FILE}: cannot read {path}: {exc}"
        ) from None


def select_probe(config: GateConfig, env: Mapping[str, str]) -> DeviceProbe:
    """The probe for this run: the simulation hook if set, else CUDA or the CPU skip."""
    simulated = env.get(ENV_SIMULATE_MISSING_DEVICE, "").strip() or _simulated_from_file(env)
    if simulated:
        try:
            missing = frozenset(int(part) for part in simulated.split(",") if part.strip())
        except ValueError:
            raise GateConfigError(
                "config.invalid",
                f"{ENV_SIMULATE_MISSING_DEVICE}: {simulated!r} must be comma-separated device indices",
            ) from None
        return SimulatedProbe(missing)
    if "devices" not in config.checks or config.device == "cpu":
        return SkippedProbe()
    from hyperframe_runtime.smoke.cuda_checks import CudaProbe  # torch.cuda only where needed

    return CudaProbe()
