"""Progress reports from the training ranks to the operator.

The trainer calls :func:`report` once per frame on node rank 0 / local rank 0. The update is
always logged as one line (that is the local-mode and no-operator behaviour). When the pod was
rendered by the operator, ``HYPERFRAME_STATUS_URL`` names the operator's status endpoint and
``HYPERFRAME_STATUS_TOKEN_FILE`` a projected service-account token bound to this pod; the update
is then POSTed there with that token, so only the job's own pods can report for it.

Reporting is best effort and bounded: a slow or absent operator never stalls training.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass

from hyperframe.constants import ENV_STATUS_TOKEN_FILE, ENV_STATUS_URL

__all__ = ["ProgressUpdate", "format_line", "report"]

log = logging.getLogger("hyperframe.progress")

_POST_TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressUpdate:
    """One frame's progress, as the operator stores it in ``status.progress``."""

    frame: int
    """Frames completed so far (1-based after the first frame finishes)."""
    totalFrames: int  # wire name, same as status.progress
    step: int
    """Optimizer steps completed (one per frame)."""
    loss: float
    samplesPerSecond: float
    etaSeconds: float
    """Estimated seconds until the last frame ends; 0 when done."""


def format_line(update: ProgressUpdate) -> str:
    """The human-readable per-frame line used in logs and local mode."""
    return (
        f"frame {update.frame}/{update.totalFrames} step {update.step} "
        f"loss {update.loss:.4f} {update.samplesPerSecond:.1f} samples/s eta {update.etaSeconds:.0f}s"
    )


def report(update: ProgressUpdate) -> bool:
    """Log the update and, when running under the operator, post it. Returns True if posted."""
    log.info("%s", format_line(update))
    url = os.environ.get(ENV_STATUS_URL)
    token_file = os.environ.get(ENV_STATUS_TOKEN_FILE)
    if not url or not token_file:
        return False
    try:
        with open(token_file, encoding="utf-8") as fh:
            token = fh.read().strip()
    except OSError as exc:
        log.warning("progress not posted: cannot read %s=%s: %s", ENV_STATUS_TOKEN_FILE, token_file, exc)
        return False
    body = json.dumps(asdict(update)).encode()
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=_POST_TIMEOUT_S) as resp:
            return 200 <= int(resp.status) < 300
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        log.warning("progress not posted to %s: %s", url, exc)
        return False
