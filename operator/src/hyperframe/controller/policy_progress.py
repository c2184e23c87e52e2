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
from datetime import datetime
from typing import Any

from hyperframe.constants import MAX_PROGRESS_METRICS, PROGRESS_METRIC_NAME_MAX

from .observed import ObservedPod
from .status import format_time

__all__ = ["final_progress", "parse_progress", "progress_from_termination", "rank0_progress"]

_FIELDS: Mapping[str, type] = {
    "frame": int,
    "totalFrames": int,
    "step": int,
    "loss": float,
    "samplesPerSecond": float,
    "etaSeconds": float,
}
_UPDATED_AT = "updatedAt"


def parse_progress(data: object) -> dict[str, Any]:
    """The ``status.progress`` fields of a report; raises ValueError naming a bad field."""
    if not isinstance(data, Mapping):
        raise ValueError("body: expected a JSON object with " + ", ".join(_FIELDS))
    out: dict[str, Any] = {}
    for name, kind in _FIELDS.items():
        value = data.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name}: expected a number, got {value!r:.40}")
        if kind is int:
            if value != int(value) or value < 0:
                raise ValueError(f"{name}: expected a non-negative integer, got {value}")
            out[name] = int(value)
        else:
            if not math.isfinite(value):
                continue  # a NaN loss is reported as absent rather than breaking the status write
            if name != "loss" and value < 0:
                raise ValueError(f"{name}: expected >= 0, got {value}")
            out[name] = float(value)
    metrics = data.get("metrics")
    if metrics is not None:
        out["metrics"] = _parse_metrics(metrics)
    return out


def _parse_metrics(data: object) -> dict[str, float]:
    """``metrics``: the runtime sends at most MAX_PROGRESS_METRICS finite numbers by name (it drops
    the rest); a report past that bound is refused rather than cut here."""
    if not isinstance(data, Mapping):
        raise ValueError("metrics: expected an object of name -> number")
    if len(data) > MAX_PROGRESS_METRICS:
        raise ValueError(f"metrics: {len(data)} names, at most {MAX_PROGRESS_METRICS}")
    out: dict[str, float] = {}
    for name, value in data.items():
        if not isinstance(name, str) or not name or len(name) > PROGRESS_METRIC_NAME_MAX:
            raise ValueError(
                f"metrics: name {name!r:.70}: expected 1 to {PROGRESS_METRIC_NAME_MAX} characters"
            )
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"metrics.{name}: expected a finite number, got {value!r:.40}")
        out[name] = float(value)
    return out


def progress_from_termination(message: str) -> dict[str, Any] | None:
    """The trainer's last update in a launcher's termination message (``{"progress": {...}}``), or
    None when there is none or it is unreadable (a message cut by the kubelet, a gate report)."""
    try:
        data = json.loads(message)
    except ValueError:
        return None
    if not isinstance(data, Mapping) or not isinstance(data.get("progress"), Mapping):
        return None
    try:
        progress = parse_progress(data["progress"])
    except ValueError:
        return None
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
    figures: dict[str, Any] = {k: v for k, v in reported.items() if k in _FIELDS}
    # The termination message carries the figures only (it must fit 4 KiB); the user metrics of
    # the last post stay.
    if stored is not None and "metrics" in stored:
        figures["metrics"] = stored["metrics"]
    if stored is not None and {k: v for k, v in stored.items() if k != _UPDATED_AT} == figures:
        return stored
    return {**figures, _UPDATED_AT: format_time(now)}
