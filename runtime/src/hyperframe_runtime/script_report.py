"""``hyperframe_runtime.report()``: a plain script's progress, into ``status.progress``.

A script job (``entrypoint.script``) trains in its own loop; this is its one call into
HyperFrame. Every rank may call it; only global rank 0 (``RANK``, set by torchrun) reports, so
a DDP loop needs no ``if rank == 0``. The figures take the runtime's own progress path
(:class:`~hyperframe_runtime.progress.ProgressReporter`): kept in ``HYPERFRAME_PROGRESS_FILE``
for the termination message, posted to the operator with the pod's token, re-posted every
:data:`~hyperframe_runtime.progress.HEARTBEAT_SECONDS` between calls. A script's step is its
frame: ``status.progress.frame`` and ``step`` both carry it, and ``totalFrames`` the
``total_steps`` when given (0 otherwise). Outside a HyperFrame pod (no endpoint, no file) it only
logs, so a script runs unchanged on a laptop.

Pure standard library: calling it imports no torch and never stalls the loop (posts are bounded).
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import threading
import time
from dataclasses import dataclass

from hyperframe_runtime.progress import ProgressReporter, ProgressUpdate, bounded_metrics

__all__ = ["report"]

log = logging.getLogger("hyperframe.progress")


@dataclass(slots=True)
class _Run:
    """What the reports of this process have seen so far (for the rate and the ETA)."""

    reporter: ProgressReporter
    first_step: int
    first_time: float


_lock = threading.Lock()
_run: _Run | None = None


def _eta(run: _Run | None, step: int, total: int, now: float) -> float:
    if run is None or total <= 0 or step <= run.first_step:
        return math.nan
    per_step = (now - run.first_time) / (step - run.first_step)
    return max(0.0, (total - step) * per_step)


def report(
    step: int,
    loss: float | None = None,
    *,
    total_steps: int | None = None,
    samples_per_second: float | None = None,
    **metrics: float,
) -> bool:
    """Report that ``step`` steps are done, with the loss and any named metrics (at most 64
    finite numbers; the rest are dropped with a warning). Returns True when this call reported
    (global rank 0), False on the other ranks."""
    global _run
    if os.environ.get("RANK", "0").strip() not in ("", "0"):
        return False
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"report(step={step!r}): step must be a non-negative integer")
    bounded = bounded_metrics(metrics)
    for name, why in bounded.dropped.items():
        log.warning("report(): metric %s dropped: %s", name, why)
    total = total_steps or 0
    now = time.monotonic()
    with _lock:
        update = ProgressUpdate(
            frame=step,
            totalFrames=total,
            step=step,
            loss=float(loss) if loss is not None else math.nan,
            samplesPerSecond=float(samples_per_second) if samples_per_second is not None else math.nan,
            etaSeconds=0.0 if total and step >= total else _eta(_run, step, total, now),
            metrics=bounded.kept,
        )
        if _run is None:
            # The reporter keeps and posts its first update itself (its heartbeat posts at once).
            _run = _Run(reporter=ProgressReporter(update), first_step=step, first_time=now)
            atexit.register(_run.reporter.close)
            return True
        run = _run
    run.reporter.report(update)
    return True
