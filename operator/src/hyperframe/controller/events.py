"""Kubernetes Events on a HyperFrameJob (what ``kubectl describe`` shows), built as plain dicts."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from hyperframe.constants import API_VERSION, JOB_KIND, MANAGED_BY

from .plan import Event
from .status import format_time

__all__ = ["event_body"]

_MESSAGE_MAX = 1024
_INSTANCE = os.environ.get("POD_NAME") or socket.gethostname()


def event_body(job: Mapping[str, Any], event: Event, *, now: datetime | None = None) -> dict[str, Any]:
    meta = job.get("metadata") or {}
    stamp = format_time(now or datetime.now(UTC))
    message = (
        event.message if len(event.message) <= _MESSAGE_MAX else event.message[: _MESSAGE_MAX - 3] + "..."
    )
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta.get('name', 'job')}.", "namespace": meta.get("namespace")},
        "involvedObject": {
            "apiVersion": API_VERSION,
            "kind": JOB_KIND,
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": event.reason,
        "message": message,
        "type": event.type.value,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "source": {"component": MANAGED_BY},
        "reportingComponent": f"hyperframe.dev/{MANAGED_BY}",
        "reportingInstance": _INSTANCE,
    }
