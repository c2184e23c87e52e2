"""Leader election over a coordination.k8s.io Lease, as client-go's leaderelection does it.

One replica is active: the one holding the Lease. The others only read the Lease every
``retry_seconds`` and write nothing until it has gone unrenewed for ``lease_seconds``. Expiry is
judged on the standby's own monotonic clock, from the moment it last saw the record *change*
(client-go's rule), so clock skew between nodes cannot make two replicas leaders. Every write
carries the resourceVersion it was decided on, so of two standbys racing for an expired Lease only
one wins (the other gets 409 and keeps waiting).

A successful Lease write begins a *term* (:mod:`.fence`): ``renew_deadline_seconds`` from the start
of the attempt that made it. Renewal attempts run every ``retry_seconds`` under that one deadline:
each attempt, and each of its requests, is cut off when the term ends, and when it ends unrenewed
the leader steps down. The term's end is also the :class:`~.fence.WriteFence` that every write of
the leader's API client checks right before it is sent. Since a standby can take over only
``lease_seconds`` after it saw the last renewal, which was written after its term began, the old
leader's last write has been sent and given up on ``lease_seconds - renew_deadline_seconds`` before
the earliest takeover.

:func:`decide` and the rules in :mod:`.fence` are the pure part (unit-tested);
:class:`LeaderElector` does the I/O.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from .fence import WriteFence, request_budget, term_end
from .kube import ApiError

__all__ = ["Action", "LeaderElector", "LeaseApi", "LeaseRecord", "decide", "lease_body", "own_namespace"]

_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def own_namespace() -> str:
    """The namespace of the operator's pod, or ``default`` outside a pod."""
    try:
        return _SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip() or "default"
    except OSError:
        return "default"


log = logging.getLogger("hyperframe.controller.leader")


class Action(enum.Enum):
    CREATE = "create"
    """No Lease yet: create it, holding it."""
    RENEW = "renew"
    """This replica holds it: write a new renewTime."""
    TAKE = "take"
    """The holder let it expire (or released it): take it over."""
    WAIT = "wait"
    """Another replica holds a live Lease: do nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseRecord:
    """The fields of a Lease the election reads."""

    holder: str
    lease_seconds: int
    renew_time: str
    transitions: int
    resource_version: str

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_seconds=int(spec.get("leaseDurationSeconds") or 0),
            renew_time=str(spec.get("renewTime") or ""),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=str((lease.get("metadata") or {}).get("resourceVersion") or ""),
        )


def decide(record: LeaseRecord | None, identity: str, *, unchanged_for: float) -> Action:
    """What to do with the Lease as read now.

    ``unchanged_for`` is how long (on this replica's monotonic clock) the record has been seen
    unchanged; the Lease has expired when that exceeds its own leaseDurationSeconds.
    """
    if record is None:
        return Action.CREATE
    if record.holder == identity:
        return Action.RENEW
    if not record.holder or unchanged_for > record.lease_seconds:
        return Action.TAKE
    return Action.WAIT


def lease_body(
    *, name: str, namespace: str, identity: str, lease_seconds: int, transitions: int, resource_version: str
) -> dict[str, Any]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    body: dict[str, Any] = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "holderIdentity": identity,
            "leaseDurationSeconds": lease_seconds,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": transitions,
        },
    }
    if resource_version:
        body["metadata"]["resourceVersion"] = resource_version
    return body


class LeaseApi(Protocol):
    """The Lease calls; ``timeout`` is the total seconds a request may take."""

    async def get_lease(self, namespace: str, name: str, *, timeout: float) -> dict[str, Any] | None: ...

    async def create_lease(
        self, namespace: str, body: Mapping[str, Any], *, timeout: float
    ) -> dict[str, Any]: ...

    async def replace_lease(
        self, namespace: str, name: str, body: Mapping[str, Any], *, timeout: float
    ) -> dict[str, Any]: ...


_LEASE_REQUEST_TIMEOUT = 10.0
"""The most one Lease request may take (less when the term ends sooner)."""


class _TermOver(Exception):
    """The attempt's deadline passed before its next request could be sent."""


class LeaderElector:
    """Acquire the Lease, run ``on_leading`` once, then renew until renewing fails."""

    def __init__(
        self,
        api: LeaseApi,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_seconds: float,
        renew_deadline_seconds: float,
        retry_seconds: float,
        fence: WriteFence | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._clock = clock
        self.fence = fence if fence is not None else WriteFence(clock)
        self._namespace = namespace
        self._name = name
        self.identity = identity
        self._lease_seconds = max(1, round(lease_seconds))
        self._renew_deadline = renew_deadline_seconds
        self._retry = retry_seconds
        self._seen: LeaseRecord | None = None
        self._seen_at = clock()

    async def run(self, on_leading: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Return only when leadership is lost; the fence is closed by then (the caller stops acting).

        ``on_leading`` runs beside the renewals, so a slow start (listing a big cluster) cannot
        let the Lease expire under it; an exception it raises is raised here.
        """
        while True:
            started = self._clock()
            if await self._attempt(term_end(started, self._renew_deadline)):
                break
            await asyncio.sleep(self._retry)
        valid_until = self.fence.valid_until
        log.info("became the leader (Lease %s/%s, identity %s)", self._namespace, self._name, self.identity)
        starting = asyncio.create_task(on_leading(), name="become-leader")
        try:
            while True:
                await asyncio.sleep(max(0.0, min(self._retry, valid_until - self._clock())))
                if starting.done():
                    starting.result()  # raises what the start raised
                started = self._clock()
                if started >= valid_until:
                    log.error(
                        "lost the Lease %s/%s: not renewed within %.1f s",
                        self._namespace,
                        self._name,
                        self._renew_deadline,
                    )
                    return
                if await self._attempt(valid_until):
                    valid_until = self.fence.valid_until
        finally:
            self.fence.close()
            if not starting.done():
                starting.cancel()
                await asyncio.gather(starting, return_exceptions=True)

    async def _attempt(self, deadline: float) -> bool:
        """One acquire-or-renew attempt, cut off at ``deadline``; on success the term is extended."""
        started = self._clock()
        remaining = deadline - started
        if remaining <= 0:
            return False
        # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the inner result when this
        # task is cancelled in the step the attempt finishes, and the elector then never stopped.
        try:
            async with asyncio.timeout(remaining):
                written = await self._try_acquire_or_renew(deadline)
        except (TimeoutError, _TermOver):
            return False
        if written:
            self.fence.extend(term_end(started, self._renew_deadline))
        return written

    def _budget(self, deadline: float) -> float:
        budget = request_budget(deadline, self._clock(), _LEASE_REQUEST_TIMEOUT)
        if budget is None:
            raise _TermOver
        return budget

    async def _try_acquire_or_renew(self, deadline: float) -> bool:
        try:
            lease = await self._api.get_lease(self._namespace, self._name, timeout=self._budget(deadline))
        except (ApiError, OSError) as exc:
            log.warning("Lease %s/%s not read: %s", self._namespace, self._name, exc)
            return False
        record = LeaseRecord.from_lease(lease) if lease is not None else None
        now = self._clock()
        if record != self._seen:
            self._seen, self._seen_at = record, now
        action = decide(record, self.identity, unchanged_for=now - self._seen_at)
        if action is Action.WAIT:
            return False
        transitions = 0 if record is None else record.transitions + (action is Action.TAKE)
        body = lease_body(
            name=self._name,
            namespace=self._namespace,
            identity=self.identity,
            lease_seconds=self._lease_seconds,
            transitions=transitions,
            resource_version=record.resource_version if record else "",
        )
        if action is Action.RENEW and record is not None:
            # Keep the acquire time of this term: only renewTime moves.
            body["spec"]["acquireTime"] = (
                (lease or {}).get("spec", {}).get("acquireTime", body["spec"]["acquireTime"])
            )
        try:
            timeout = self._budget(deadline)
            if action is Action.CREATE:
                written = await self._api.create_lease(self._namespace, body, timeout=timeout)
            else:
                written = await self._api.replace_lease(self._namespace, self._name, body, timeout=timeout)
        except (ApiError, OSError) as exc:  # 409: another replica wrote first
            log.info("Lease %s/%s not written (%s): %s", self._namespace, self._name, action.value, exc)
            return False
        self._seen, self._seen_at = LeaseRecord.from_lease(written), self._clock()
        return True

    async def release(self) -> None:
        """Hand the Lease back on a clean shutdown, so a standby takes over without waiting it out."""
        try:
            lease = await self._api.get_lease(self._namespace, self._name, timeout=_LEASE_REQUEST_TIMEOUT)
            if lease is None or LeaseRecord.from_lease(lease).holder != self.identity:
                return
            spec = dict(lease.get("spec") or {})
            spec.update(holderIdentity="", leaseDurationSeconds=1)
            await self._api.replace_lease(
                self._namespace, self._name, {**lease, "spec": spec}, timeout=_LEASE_REQUEST_TIMEOUT
            )
            log.info("released the Lease %s/%s", self._namespace, self._name)
        except (ApiError, OSError) as exc:
            log.warning(
                "Lease %s/%s not released (it expires by itself): %s", self._namespace, self._name, exc
            )
