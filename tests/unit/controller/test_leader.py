"""Leader election over a Lease: the pure decision, and electors racing on an in-memory Lease store
that enforces resourceVersion preconditions the way the API server does."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

import pytest
from hyperframe.controller.config import ConfigError, OperatorConfig
from hyperframe.controller.kube import ApiError, Conflict
from hyperframe.controller.leader import Action, LeaderElector, LeaseRecord, decide


def record(holder: str, lease_seconds: int = 15) -> LeaseRecord:
    return LeaseRecord(
        holder=holder, lease_seconds=lease_seconds, renew_time="t", transitions=0, resource_version="1"
    )


def test_decide_covers_every_case() -> None:
    assert decide(None, "a", unchanged_for=0) is Action.CREATE
    assert decide(record("a"), "a", unchanged_for=100) is Action.RENEW
    assert decide(record("b"), "a", unchanged_for=14.9) is Action.WAIT
    assert decide(record("b"), "a", unchanged_for=15.1) is Action.TAKE
    assert decide(record(""), "a", unchanged_for=0) is Action.TAKE  # released on a clean shutdown


class LeaseStore:
    """One Lease with the API server's optimistic concurrency; records who wrote."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.writers: list[str] = []
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise ApiError(503, "Service Unavailable", "")

    async def get_lease(self, namespace: str, name: str, *, timeout: float) -> dict[str, Any] | None:
        self._check()
        return copy.deepcopy(self.lease)

    async def create_lease(
        self, namespace: str, body: Mapping[str, Any], *, timeout: float
    ) -> dict[str, Any]:
        self._check()
        if self.lease is not None:
            raise Conflict(409, "AlreadyExists", "")
        return self._store(body)

    async def replace_lease(
        self, namespace: str, name: str, body: Mapping[str, Any], *, timeout: float
    ) -> dict[str, Any]:
        self._check()
        if self.lease is None or body["metadata"].get("resourceVersion") != str(self.version):
            raise Conflict(409, "Conflict", "")
        return self._store(body)

    def _store(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.version += 1
        self.lease = copy.deepcopy(dict(body))
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        self.writers.append(str(body["spec"]["holderIdentity"]))
        return copy.deepcopy(self.lease)

    @property
    def holder(self) -> str:
        return str(((self.lease or {}).get("spec") or {}).get("holderIdentity", ""))


def elector(store: LeaseStore, identity: str) -> LeaderElector:
    return LeaderElector(
        store,
        namespace="ns",
        name="op",
        identity=identity,
        # Generous for a loaded test machine: a standby takes over only after 3 s of silence.
        lease_seconds=3,
        renew_deadline_seconds=2,
        retry_seconds=0.1,
    )


def test_one_leader_and_a_silent_standby_until_the_leader_stops_renewing() -> None:
    async def scenario() -> None:
        store = LeaseStore()
        leading: list[str] = []

        def on_leading(name: str) -> Any:
            async def started() -> None:
                leading.append(name)

            return started

        a, b = elector(store, "a"), elector(store, "b")
        task_a = asyncio.create_task(a.run(on_leading("a")))
        while not leading:
            await asyncio.sleep(0.01)
        task_b = asyncio.create_task(b.run(on_leading("b")))
        await asyncio.sleep(0.5)  # several renewals of a, several reads of b
        assert leading == ["a"] and store.holder == "a"
        assert set(store.writers) == {"a"}, "the standby wrote the Lease while the leader renewed it"
        task_a.cancel()  # the leader dies without releasing
        await asyncio.gather(task_a, return_exceptions=True)
        while len(leading) < 2:
            await asyncio.sleep(0.01)
        assert leading == ["a", "b"] and store.holder == "b"
        assert store.lease is not None and store.lease["spec"]["leaseTransitions"] == 1
        task_b.cancel()
        await asyncio.gather(task_b, return_exceptions=True)

    asyncio.run(asyncio.wait_for(scenario(), timeout=30))


def test_a_leader_that_cannot_renew_steps_down_before_its_lease_expires() -> None:
    async def scenario() -> None:
        store = LeaseStore()
        led = asyncio.Event()

        async def on_leading() -> None:
            led.set()

        task = asyncio.create_task(elector(store, "a").run(on_leading))
        await led.wait()
        store.down = True
        await asyncio.wait_for(task, timeout=5)  # run() returns: leadership lost

    asyncio.run(asyncio.wait_for(scenario(), timeout=30))


def test_release_lets_a_standby_take_over_at_once() -> None:
    async def scenario() -> None:
        store = LeaseStore()
        a = elector(store, "a")
        led = asyncio.Event()

        async def on_leading() -> None:
            led.set()

        task = asyncio.create_task(a.run(on_leading))
        await led.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await a.release()
        assert store.holder == ""
        record = LeaseRecord.from_lease(store.lease or {})
        assert decide(record, "b", unchanged_for=0) is Action.TAKE

    asyncio.run(asyncio.wait_for(scenario(), timeout=30))


def test_lease_timings_must_keep_two_leaders_apart() -> None:
    with pytest.raises(ConfigError, match="HYPERFRAME_LEASE_RETRY_SECONDS"):
        OperatorConfig(lease_renew_deadline_seconds=20)
    OperatorConfig(lease_duration_seconds=6, lease_renew_deadline_seconds=4, lease_retry_seconds=1)


def test_a_slow_start_keeps_renewing_and_a_failed_start_is_raised() -> None:
    async def scenario() -> None:
        store = LeaseStore()
        started = asyncio.Event()

        async def slow_start() -> None:
            started.set()
            await asyncio.sleep(3600)  # listing a huge cluster

        task = asyncio.create_task(elector(store, "a").run(slow_start))
        await started.wait()
        standby = asyncio.create_task(elector(store, "b").run(slow_start))
        while store.version < 40:  # well past the 3 s lease: renewals went on during the start
            await asyncio.sleep(0.05)
        assert set(store.writers) == {"a"}
        for t in (task, standby):
            t.cancel()
        await asyncio.gather(task, standby, return_exceptions=True)

        async def failing_start() -> None:
            raise OSError("port 8081 in use")

        with pytest.raises(OSError, match="8081"):
            await elector(LeaseStore(), "c").run(failing_start)

    asyncio.run(asyncio.wait_for(scenario(), timeout=60))
