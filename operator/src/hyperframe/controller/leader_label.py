"""The leader's mark on its own pod: ``hyperframe.dev/operator-leader=true`` while it holds the Lease.

Every replica is Ready as soon as it is healthy (readiness is not leadership, so a rolling update
of two replicas can complete). The progress posts must still reach the one replica that writes
status: the chart's Service selects this label, so it routes to the leader's pod alone. The
leader sets the label once its progress endpoint listens, and removes it when it stops leading.
A replica removes a label it finds on its own pod at start (a leader that was SIGKILLed and
restarted in the same pod leaves one behind), so at most the few seconds between a crash and the
restart can route a post to a pod that does not listen; the trainer posts again within
``HEARTBEAT_SECONDS``, and the final figures travel in the termination message anyway.

:func:`label_change` is the pure part; :class:`LeaderLabel` does the two API calls.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from hyperframe.constants import LABEL_OPERATOR_LEADER

from .kube import ApiError, KubeApi

__all__ = ["LEADER_VALUE", "LeaderLabel", "label_change"]

log = logging.getLogger("hyperframe.controller.leader")

LEADER_VALUE = "true"


def label_change(pod: Mapping[str, Any] | None, *, leading: bool) -> dict[str, str | None] | None:
    """The label patch that makes ``pod`` show ``leading``; None when it already does (or is gone)."""
    if pod is None:
        return None
    labels = (pod.get("metadata") or {}).get("labels") or {}
    has = labels.get(LABEL_OPERATOR_LEADER) == LEADER_VALUE
    if has == leading:
        return None
    return {LABEL_OPERATOR_LEADER: LEADER_VALUE if leading else None}


class LeaderLabel:
    """Sets and removes the leader label on the operator's own pod (``namespace``/``pod``)."""

    def __init__(self, kube: KubeApi, *, namespace: str, pod: str) -> None:
        self._kube = kube
        self._namespace = namespace
        self._pod = pod

    async def show(self, *, leading: bool) -> None:
        """Make the pod's label say ``leading``: one read, and a write only when it differs."""
        pod = await self._kube.get_pod(self._namespace, self._pod)
        change = label_change(pod, leading=leading)
        if change is None:
            return
        await self._kube.label_pod(self._namespace, self._pod, change)
        log.info(
            "pod %s/%s %s the leader label", self._namespace, self._pod, "carries" if leading else "dropped"
        )

    async def drop(self) -> None:
        """Best effort on the way out: a failure is logged (the next start removes the label)."""
        try:
            await self.show(leading=False)
        except ApiError as exc:
            log.warning("leader label not removed from %s/%s: %s", self._namespace, self._pod, exc)
