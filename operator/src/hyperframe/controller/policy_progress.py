"""Progress policy: which figures ``status.progress`` carries, and the final figures of a finished job.

While a job runs, ``status.progress`` is what rank 0 last posted to the progress endpoint
(:mod:`.progress_server`). A post can be lost at the end (the pod exits before the last post, or
between two coalesced writes), so the launcher also puts the trainer's last update into the
rank-0 pod's termination message. When the job is finished, that update is the final word: the
trainer writes it before each post, so it is never older than any post of the same gang, and a
post of an earlier gang (before a restart) is older still. :func:`final_progress` takes it over;
without one (rank 0 was killed before it could write), the posted figures stay.

Pure functions of plain data; no API calls.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from hyperframe.api.codec import dump, parse_lenient
from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.fields import json_name, value_rules
from hyperframe.api.introspect import model_fields
from hyperframe.constants import MAX_PROGRESS_METRICS, PROGRESS_METRIC_NAME_MAX

from .observed import ObservedPod
from .status import format_time

__all__ = [
    "ProgressReport",
    "final_progress",
    "parse_progress",
    "progress_from_termination",
    "rank0_progress",
    "read_progress",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressReport:
    """What rank 0 reports (the runtime's ``ProgressUpdate``), read by the API codec from the rules
    declared here; every figure may be absent."""

    frame: int | None = field(default=None, metadata=value_rules(minimum=0))
    total_frames: int | None = field(default=None, metadata=value_rules(json="totalFrames", minimum=0))
    step: int | None = field(default=None, metadata=value_rules(minimum=0))
    loss: float | None = None
    samples_per_second: float | None = field(
        default=None, metadata=value_rules(json="samplesPerSecond", minimum=0)
    )
    eta_seconds: float | None = field(default=None, metadata=value_rules(json="etaSeconds", minimum=0))
    metrics: dict[str, float] | None = field(
        default=None,
        metadata=value_rules(
            max_items=MAX_PROGRESS_METRICS, max_key_length=PROGRESS_METRIC_NAME_MAX, finite=True
        ),
    )
    """User metrics by name: the runtime sends at most MAX_PROGRESS_METRICS finite numbers (it
    drops the rest); a report past that bound is refused rather than cut here."""


_FIGURES: Final = tuple(json_name(f) for f, _ in model_fields(ProgressReport) if f.name != "metrics")
# A NaN or infinite figure (a diverged loss) is reported as absent rather than breaking the status write.
_ABSENT_UNLESS_FINITE: Final = frozenset(
    json_name(f) for f, shape in model_fields(ProgressReport) if shape.kind == "float"
)
_UPDATED_AT = "updatedAt"


def read_progress(data: object) -> tuple[dict[str, Any], list[FieldError]]:
    """The ``status.progress`` fields of a report that are right, and every problem of the rest
    (``path: problem: fix``): a bad field never loses the good ones."""
    if isinstance(data, Mapping):
        data = {k: v for k, v in data.items() if not (k in _ABSENT_UNLESS_FINITE and _non_finite(v))}
    report, errors = parse_lenient(ProgressReport, data)
    return ({} if report is None else dump(report)), errors


def parse_progress(data: object) -> dict[str, Any]:
    """The ``status.progress`` fields of a posted report; raises :class:`SpecError` (a ValueError)
    naming every bad field, so the post is refused whole and the runtime is told why."""
    progress, errors = read_progress(data)
    if errors:
        raise SpecError(errors)
    return progress


def _non_finite(value: object) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def progress_from_termination(message: str) -> dict[str, Any] | None:
    """The trainer's last update in a launcher's termination message (``{"progress": {...}}``), or
    None when there is none or it is unreadable (a message cut by the kubelet, a gate report)."""
    try:
        data = json.loads(message)
    except ValueError:
        return None
    if not isinstance(data, Mapping) or not isinstance(data.get("progress"), Mapping):
        return None
    progress, _ = read_progress(data["progress"])
    return progress if "frame" in progress else None


def rank0_progress(pods: Sequence[ObservedPod], generation: int) -> dict[str, Any] | None:
    """The final update in the termination message of gang ``generation``'s rank-0 main container."""
    for pod in pods:
        if pod.rank == 0 and pod.generation == generation and pod.main_end is not None:
            return progress_from_termination(pod.main_end.message)
    return None


def final_progress(
    stored: Mapping[str, Any] | None, reported: Mapping[str, Any] | None, now: datetime
) -> Mapping[str, Any] | None:
    """``status.progress`` of a finished job: the trainer's final update when there is one, stamped
    ``now``; the stored figures when there is none or they already match (so the decision is
    stable: the same inputs never change ``updatedAt`` again)."""
    if reported is None:
        return stored
    figures: dict[str, Any] = {k: v for k, v in reported.items() if k in _FIGURES}
    # The termination message carries the figures only (it must fit 4 KiB); the user metrics of
    # the last post stay.
    if stored is not None and "metrics" in stored:
        figures["metrics"] = stored["metrics"]
    if stored is not None and {k: v for k, v in stored.items() if k != _UPDATED_AT} == figures:
        return stored
    return {**figures, _UPDATED_AT: format_time(now)}
