"""The smoke gate's result as it travels from the init container to the operator.

The gate (runtime, with torch) builds a :class:`SmokeReport` and writes
:meth:`SmokeReport.to_termination_message` to the container's termination-message path; the
kubelet keeps at most :data:`~hyperframe.constants.TERMINATION_MESSAGE_MAX_BYTES` of it. The
operator (no torch) reads it back with :meth:`SmokeReport.from_termination_message`, which never
raises: a cut or garbled message still yields a report whose ``reason`` says what went wrong.

Compaction is graceful: when the full per-device list does not fit (say 8 GPUs x 64 nodes), the
message keeps this node's and every failing device, summarises the rest in ``device_summary``,
then drops names, then shortens the texts, and always fits.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any, Final

from hyperframe.api.codec import parse_lenient
from hyperframe.constants import TERMINATION_MESSAGE_MAX_BYTES, SmokeExit
from hyperframe.smoke_remedies import FAILURES, remedy_for

__all__ = ["REPORT_VERSION", "DeviceFigures", "DeviceSummary", "Fault", "SmokeReport"]

REPORT_VERSION: Final = 1
_FAILED_DEVICES_KEPT: Final = 16
_LIST_KEPT: Final = 32


def _round(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.4g}")  # 4 significant digits: right for 0.13 GB/s and for 712.3 TFLOP/s


class Fault(StrEnum):
    """Whose fault a failed gate is, as the reporting node sees it (``SmokeReport.fault``)."""

    OWN = "own"
    """This node's own device or host check failed (it is among ``suspect_node_ranks``)."""
    OTHER = "other"
    """This node is healthy; it failed only because the nodes in ``suspect_node_ranks`` did."""
    UNATTRIBUTED = "unattributed"
    """No node is singled out (a job-wide busbw shortfall, a collective error): blame nobody."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceFigures:
    """What the gate measured on one device."""

    index: int
    """Local device index on its node (CUDA ordinal); for CPU jobs the local rank."""
    name: str
    """Device name, e.g. ``NVIDIA H100 80GB HBM3``; ``cpu`` when device checks were skipped."""
    tflops: float | None = None
    """Measured matmul TFLOP/s; None when not measured (CPU, or the check did not get that far)."""
    mem_bw_gbps: float | None = None
    """Measured device memory bandwidth in GB/s (copy: read + write); None when not measured."""
    ok: bool = True
    """False when a device check failed on this device."""
    node_rank: int | None = None
    """The node the device belongs to; None means the report's own node."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceSummary:
    """Aggregate over all devices, present when the per-device list had to be shortened."""

    count: int
    failed: int
    tflops_min: float | None = None
    tflops_median: float | None = None
    mem_bw_min_gbps: float | None = None
    mem_bw_median_gbps: float | None = None

    @classmethod
    def of(cls, devices: list[DeviceFigures]) -> DeviceSummary:
        tflops = [d.tflops for d in devices if d.tflops is not None]
        bws = [d.mem_bw_gbps for d in devices if d.mem_bw_gbps is not None]
        return cls(
            count=len(devices),
            failed=sum(1 for d in devices if not d.ok),
            tflops_min=_round(min(tflops)) if tflops else None,
            tflops_median=_round(statistics.median(tflops)) if tflops else None,
            mem_bw_min_gbps=_round(min(bws)) if bws else None,
            mem_bw_median_gbps=_round(statistics.median(bws)) if bws else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SmokeReport:
    """One node's gate result (with job-wide figures where the gate collected them)."""

    version: int = REPORT_VERSION
    ok: bool
    exit_code: int
    """A :class:`~hyperframe.constants.SmokeExit` value."""
    node: str
    """Kubernetes node name (env NODE_NAME, else the hostname)."""
    node_rank: int | None = None
    failed_check: str | None = None
    """The first failing reason id (a key of :data:`~hyperframe.smoke_remedies.FAILURES`), or None."""
    reason: str = ""
    """What failed, with the measured figures and the device or ranks named."""
    remedy: str = ""
    """One line the user can act on (from the remedy table)."""
    busbw_gbps: float | None = None
    """Minimum all-reduce bus bandwidth over the configured sizes (nccl-tests definition)."""
    algbw_gbps: float | None = None
    """All-reduce algorithm bandwidth at the size that gave the minimum busbw."""
    world_size: int = 0
    """Ranks in the job (nodes x processes per node)."""
    duration_s: float = 0.0
    devices: list[DeviceFigures] = field(default_factory=list)
    device_summary: DeviceSummary | None = None
    """Set when ``devices`` was shortened to fit the message."""
    devices_omitted: int = 0
    """How many devices ``devices`` leaves out (counted in ``device_summary``)."""
    missing_ranks: list[int] = field(default_factory=list)
    """Global ranks that never arrived (timeouts)."""
    suspect_node_ranks: list[int] = field(default_factory=list)
    """Node ranks the gate blames (failed devices or host checks, missing ranks): the nodes at fault."""
    fault: Fault | None = None
    """Whose fault the failure is: this node's, another node's, or nobody's in particular; None on a
    pass (and in reports of gates that predate the field)."""

    @classmethod
    def failure(cls, reason_id: str, reason: str, *, node: str, **fields: Any) -> SmokeReport:
        """A failed report for a reason id, with the exit code and remedy from the table."""
        entry = FAILURES[reason_id]
        return cls(
            ok=False,
            exit_code=int(entry.exit_code),
            node=node,
            failed_check=reason_id,
            reason=reason,
            remedy=entry.remedy,
            **fields,
        )

    # -- encoding ---------------------------------------------------------------------------

    def _encode(self) -> str:
        data = asdict(self)
        data["busbw_gbps"] = _round(self.busbw_gbps)
        data["algbw_gbps"] = _round(self.algbw_gbps)
        data["duration_s"] = _round(self.duration_s)
        data["devices"] = [
            {
                k: (_round(v) if k in ("tflops", "mem_bw_gbps") else v)
                for k, v in asdict(d).items()
                if not (k == "node_rank" and v is None)
            }
            for d in self.devices
        ]
        for optional in ("device_summary", "node_rank", "fault"):
            if data[optional] is None:
                del data[optional]
        for empty in ("devices_omitted", "missing_ranks", "suspect_node_ranks"):
            if not data[empty]:
                del data[empty]
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)

    def _shortened_devices(self, *, keep_names: bool) -> SmokeReport:
        own = self.node_rank
        kept = [d for d in self.devices if not d.ok or d.node_rank is None or d.node_rank == own]
        if not keep_names:
            kept = [replace(d, name="") for d in kept if not d.ok][:_FAILED_DEVICES_KEPT]
        total = len(self.devices) + self.devices_omitted
        summary = self.device_summary or DeviceSummary.of(self.devices)
        return replace(self, devices=kept, device_summary=summary, devices_omitted=total - len(kept))

    def to_termination_message(self, max_bytes: int = TERMINATION_MESSAGE_MAX_BYTES) -> str:
        """Compact JSON of at most ``max_bytes`` UTF-8 bytes, shortened gracefully if needed."""

        def fits(text: str) -> bool:
            return len(text.encode()) <= max_bytes

        def candidates() -> list[SmokeReport]:
            step1 = self._shortened_devices(keep_names=True)
            step2 = self._shortened_devices(keep_names=False)
            step3 = replace(
                step2,
                devices=[],
                devices_omitted=step2.devices_omitted + len(step2.devices),
                reason=_cut(self.reason, 600),
                remedy=_cut(self.remedy, 300),
                missing_ranks=self.missing_ranks[:_LIST_KEPT],
                suspect_node_ranks=self.suspect_node_ranks[:_LIST_KEPT],
            )
            step4 = replace(
                step3,
                node=_cut(self.node, 63),
                reason=_cut(self.reason, 160),
                remedy=_cut(self.remedy, 160),
                missing_ranks=self.missing_ranks[:8],
                suspect_node_ranks=self.suspect_node_ranks[:8],
            )
            return [self, step1, step2, step3, step4]

        for candidate in candidates():
            text = candidate._encode()
            if fits(text):
                return text
        # Only reachable with a tiny max_bytes: the bare verdict always survives.
        bare = json.dumps(
            {"version": self.version, "ok": self.ok, "exit_code": self.exit_code},
            separators=(",", ":"),
        )
        return bare if fits(bare) else bare[:max_bytes]

    # -- decoding ---------------------------------------------------------------------------

    @classmethod
    def from_termination_message(cls, s: str, *, exit_code: int = int(SmokeExit.FAIL)) -> SmokeReport:
        """Parse a termination message; never raises.

        ``exit_code`` is the container's exit code, used when the message does not carry one
        (empty, cut or garbage). The fields are read by the API's codec, forgivingly
        (:func:`~hyperframe.api.codec.parse_lenient`): a field of the wrong type takes its default
        and is named in ``reason`` as ``path: problem: fix``, unknown fields are ignored.
        """
        text = s.strip()
        try:
            data = json.loads(text) if text else None
        except json.JSONDecodeError as exc:
            return _unreadable(
                f"termination message is not valid JSON ({exc.msg} at char {exc.pos} of {len(text)}): {_cut(text, 120)!r}",
                exit_code,
            )
        except (ValueError, RecursionError) as exc:
            return _unreadable(f"termination message is not valid JSON ({exc})", exit_code)
        if data is None:
            return _unreadable("termination message is empty", exit_code)
        if not isinstance(data, dict):
            return _unreadable(f"termination message is JSON {type(data).__name__}, not an object", exit_code)
        fallback: dict[type[Any], dict[str, Any]] = {
            SmokeReport: {"ok": False, "exit_code": exit_code, "node": ""},
            DeviceFigures: {"name": "", "ok": False},  # a device of unknown health counts as failed
            DeviceSummary: {"count": 0, "failed": 0},
        }
        parsed, errors = parse_lenient(cls, data, fallback=fallback)
        assert parsed is not None, "every required field has a fallback"
        report = parsed
        problems = [_cut(str(e), 200) for e in errors]
        if report.ok and report.exit_code != int(SmokeExit.PASS):
            problems.append(f"ok is true but exit_code is {report.exit_code}")
            report = replace(report, ok=False)
        if not report.ok and report.failed_check and not report.remedy:
            report = replace(report, remedy=remedy_for(report.failed_check))
        if problems:
            note = "report partly unreadable: " + "; ".join(problems)
            report = replace(report, reason=f"{report.reason} ({note})" if report.reason else note)
        return report


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unreadable(reason: str, exit_code: int) -> SmokeReport:
    return SmokeReport(
        ok=False,
        exit_code=exit_code,
        node="",
        failed_check="report.unreadable",
        reason=reason,
        remedy=FAILURES["report.unreadable"].remedy,
    )
