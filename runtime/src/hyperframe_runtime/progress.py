"""Progress reports from the training ranks to the operator.

Global rank 0 reports once per frame through a :class:`ProgressReporter`. The update is always
logged as one line (that is the local-mode and no-operator behaviour). When the pod was rendered
by the operator, ``HYPERFRAME_STATUS_URL`` names the operator's status endpoint and
``HYPERFRAME_STATUS_TOKEN_FILE`` a projected service-account token bound to this pod; the update
is then POSTed there with that token, so only the job's own pods can report for it. An ``https``
endpoint is trusted only through the CA the operator put into the job's ConfigMap
(``status-ca.crt`` next to ``job.json``), never the system store.

Posting is off the frame's critical path: the frame loop only hands the reporter its latest
figures, and one background thread posts them over a kept-alive connection (:class:`StatusPoster`).
A frame can also take longer than the operator's freshness promise (``status.progress`` at most
30 s old), so the same thread re-posts the latest update whenever :data:`HEARTBEAT_SECONDS` pass
without a post, starting before the first frame ends.

Reporting is best effort and bounded: a slow or absent operator never stalls training.

The trainer's last figures must not depend on a post arriving: when ``HYPERFRAME_PROGRESS_FILE``
is set (the launcher sets it for its ranks), every update is also written there, atomically and
before it is posted, so the file is never older than any post. The launcher puts the file's last
update into the pod's termination message, and the operator writes it into the status of the
finished job (see :mod:`hyperframe_runtime.launcher`).

``ProgressUpdate.metrics`` carries user-named metrics (``ModelSpec.frame_metrics``), bounded by
:func:`bounded_metrics`: at most :data:`MAX_PROGRESS_METRICS` names of at most
:data:`PROGRESS_METRIC_NAME_MAX` characters with finite values; the rest is dropped with a warning.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import os
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from hyperframe.constants import (
    CONFIG_MOUNT_PATH,
    ENV_STATUS_TOKEN_FILE,
    ENV_STATUS_URL,
    MAX_PROGRESS_METRICS,
    PROGRESS_METRIC_NAME_MAX,
    STATUS_CA_FILE_NAME,
)

__all__ = [
    "HEARTBEAT_SECONDS",
    "MAX_PROGRESS_METRICS",
    "PROGRESS_FILE_ENV",
    "BoundedMetrics",
    "ProgressReporter",
    "ProgressUpdate",
    "StatusPoster",
    "bounded_metrics",
    "format_line",
    "post_update",
    "read_latest",
    "report",
    "write_latest",
]

log = logging.getLogger("hyperframe.progress")

_POST_TIMEOUT_S = 2.0
HEARTBEAT_SECONDS: Final = 20.0
"""Longest gap between two posts: below 30 s with room for one post timeout and the operator's
write coalescing."""
STATUS_CA_FILE: Final = Path(CONFIG_MOUNT_PATH) / STATUS_CA_FILE_NAME
PROGRESS_FILE_ENV: Final = "HYPERFRAME_PROGRESS_FILE"
"""Where rank 0 keeps its latest update (set by the launcher; unset: no file)."""


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
    metrics: Mapping[str, float] = field(default_factory=dict)
    """User-named metrics of the frame, already bounded (:func:`bounded_metrics`)."""

    def to_wire(self) -> dict[str, Any]:
        """The update as JSON-safe data: a figure not measured yet (NaN, infinity) is left out, and
        so are user metrics when there are none."""
        wire = {k: v for k, v in asdict(self).items() if not (isinstance(v, float) and not math.isfinite(v))}
        if not wire.get("metrics"):
            wire.pop("metrics", None)
        return wire


@dataclass(frozen=True, slots=True)
class BoundedMetrics:
    """What :func:`bounded_metrics` kept, and the names it dropped with the reason."""

    kept: dict[str, float]
    dropped: dict[str, str]


def bounded_metrics(values: Mapping[str, object]) -> BoundedMetrics:
    """The user metrics ``status.progress`` can take (pure): names that are non-empty strings of
    at most PROGRESS_METRIC_NAME_MAX characters, values finite numbers (not bools), then the first
    MAX_PROGRESS_METRICS names in sorted order."""
    kept: dict[str, float] = {}
    dropped: dict[str, str] = {}
    for name in sorted(values, key=str):
        value = values[name]
        if not isinstance(name, str) or not name or len(name) > PROGRESS_METRIC_NAME_MAX:
            dropped[str(name)] = f"name must be 1 to {PROGRESS_METRIC_NAME_MAX} characters"
        elif isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            dropped[name] = f"value {value!r:.40} is not a finite number"
        elif len(kept) >= MAX_PROGRESS_METRICS:
            dropped[name] = f"more than {MAX_PROGRESS_METRICS} metrics"
        else:
            kept[name] = float(value)
    return BoundedMetrics(kept=kept, dropped=dropped)


def format_line(update: ProgressUpdate) -> str:
    """The human-readable per-frame line used in logs and local mode."""
    return (
        f"frame {update.frame}/{update.totalFrames} step {update.step} "
        f"loss {update.loss:.4f} {update.samplesPerSecond:.1f} samples/s eta {update.etaSeconds:.0f}s"
    )


def _tls_context(url: str, ca_file: Path) -> ssl.SSLContext | None:
    if not url.startswith("https://"):
        return None
    if not ca_file.exists():  # an endpoint behind a publicly trusted certificate
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=str(ca_file))


def _read_token(token_file: str) -> str | None:
    try:
        with open(token_file, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError as exc:
        log.warning("progress not posted: cannot read %s=%s: %s", ENV_STATUS_TOKEN_FILE, token_file, exc)
        return None


class StatusPoster:
    """POSTs updates to the operator's status endpoint over one kept-alive connection (HTTP/1.1),
    opened on the first post and again after an error. The token is read at each post: the
    kubelet rotates projected tokens in place. Callable as ``post(update) -> accepted``."""

    def __init__(self, env: Mapping[str, str] = os.environ, *, ca_file: Path = STATUS_CA_FILE) -> None:
        self.url = env.get(ENV_STATUS_URL, "")
        self._token_file = env.get(ENV_STATUS_TOKEN_FILE, "")
        self._ca_file = ca_file
        self._conn: http.client.HTTPConnection | None = None
        self.connections = 0
        """Connections opened so far (one while the endpoint keeps it alive)."""

    @property
    def configured(self) -> bool:
        return bool(self.url and self._token_file)

    def _connect(self) -> http.client.HTTPConnection:
        if self._conn is None:
            parts = urllib.parse.urlsplit(self.url)
            if parts.scheme == "https":
                self._conn = http.client.HTTPSConnection(
                    parts.hostname or "",
                    parts.port,
                    timeout=_POST_TIMEOUT_S,
                    context=_tls_context(self.url, self._ca_file),
                )
            else:
                self._conn = http.client.HTTPConnection(
                    parts.hostname or "", parts.port, timeout=_POST_TIMEOUT_S
                )
            self.connections += 1
        return self._conn

    def __call__(self, update: ProgressUpdate) -> bool:
        if not self.configured:
            return False
        token = _read_token(self._token_file)
        if token is None:
            return False
        parts = urllib.parse.urlsplit(self.url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        body = json.dumps(update.to_wire()).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
        try:
            conn = self._connect()
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            resp.read()  # drain, so the connection can carry the next request
            if resp.will_close:
                self.close()
            return 200 <= resp.status < 300
        except (http.client.HTTPException, TimeoutError, OSError, ssl.SSLError) as exc:
            log.warning("progress not posted to %s: %s", self.url, exc)
            self.close()
            return False

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def post_update(
    update: ProgressUpdate, env: Mapping[str, str] = os.environ, *, ca_file: Path = STATUS_CA_FILE
) -> bool:
    """POST the update once to the operator when the pod was given an endpoint; True if accepted."""
    poster = StatusPoster(env, ca_file=ca_file)
    try:
        return poster(update)
    finally:
        poster.close()


def write_latest(update: ProgressUpdate, path: Path) -> None:
    """Replace ``path`` with ``update`` atomically (a reader sees the old or the new update, whole)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(update.to_wire(), separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("progress not kept in %s: %s", path, exc)


def read_latest(path: Path) -> dict[str, int | float] | None:
    """The update :func:`write_latest` kept in ``path``; None when absent or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return {
        k: v
        for k, v in data.items()
        if k in ProgressUpdate.__dataclass_fields__ and isinstance(v, int | float) and not isinstance(v, bool)
    }


def report(update: ProgressUpdate) -> bool:
    """Log the update and, when running under the operator, post it once. Returns True if posted."""
    log.info("%s", format_line(update))
    return post_update(update)


class ProgressReporter:
    """Keeps the latest update and posts it from one background thread, so a frame never waits
    for the operator: :meth:`report` only logs, writes the latest file and stores the update (a
    one-slot queue, latest wins: an update not yet posted when the next arrives is never
    posted). The thread posts each new update as it comes, and re-posts the latest whenever
    ``interval`` passes without a post; :meth:`close` posts what is still pending and stops it.
    With ``latest_file`` (default: the path in ``HYPERFRAME_PROGRESS_FILE``, if set) each update
    is written there before it is posted. ``post`` defaults to a :class:`StatusPoster` (one
    kept-alive connection)."""

    def __init__(
        self,
        first: ProgressUpdate,
        *,
        post: Callable[[ProgressUpdate], bool] | None = None,
        interval: float = HEARTBEAT_SECONDS,
        latest_file: Path | None = None,
    ) -> None:
        poster = StatusPoster()
        self._poster = poster if post is None else None
        self._post: Callable[[ProgressUpdate], bool] = post or poster
        self._interval = interval
        env_file = os.environ.get(PROGRESS_FILE_ENV)
        self._latest_file = latest_file or (Path(env_file) if env_file else None)
        self._keep(first)
        self._changed = threading.Condition()
        self._latest = first
        self._pending = True
        self._stopping = False
        self.posted = 0
        """Updates posted so far (heartbeats included)."""
        self._thread = threading.Thread(target=self._run, name="progress-heartbeat", daemon=True)
        self._thread.start()

    def report(self, update: ProgressUpdate) -> None:
        """Log, keep and queue ``update`` (never waits for a post)."""
        log.info("%s", format_line(update))
        self._keep(update)
        with self._changed:
            self._latest, self._pending = update, True
            self._changed.notify()

    def _keep(self, update: ProgressUpdate) -> None:
        if self._latest_file is not None:
            write_latest(update, self._latest_file)

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._pending or self._stopping, timeout=self._interval)
                if self._stopping and not self._pending:
                    return
                latest, self._pending = self._latest, False
            self._post(latest)  # outside the lock: report() never waits for it
            self.posted += 1

    def close(self) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify()
        self._thread.join(timeout=_POST_TIMEOUT_S + 1)
        if self._poster is not None:
            self._poster.close()
