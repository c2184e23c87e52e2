"""One writer at a leader change: the old leader's last act ends before a standby can take over.

The pure rules of the term, then two electors (the operator's real API client and elector) on a
real local HTTP server whose answers to the leader first fail fast and then hang: the pattern
that used to let a renew attempt start just before the deadline and run on past the lease.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any, cast

import pytest
from hyperframe.controller.fence import NotLeader, WriteFence, request_budget, term_end
from hyperframe.controller.kube import ApiError, KubeApi
from hyperframe.controller.leader import LeaderElector
from hyperframe.controller.metrics import Metrics
from slow_apiserver import ServerState, Sickness, api_client, slow_apiserver

LEASE_SECONDS = 3.0
RENEW_DEADLINE = 2.0
RETRY = 0.2


def test_a_term_runs_from_the_start_of_the_attempt_that_renewed() -> None:
    assert term_end(100.0, 10.0) == 110.0


def test_a_request_may_not_outlast_the_term() -> None:
    assert request_budget(110.0, 100.0, 60.0) == 10.0  # capped by what is left of the term
    assert request_budget(110.0, 109.5, 60.0) == 0.5
    assert request_budget(200.0, 100.0, 60.0) == 60.0  # capped by the request timeout
    assert request_budget(110.0, 110.0, 60.0) is None  # ended: not sent at all
    assert request_budget(-math.inf, 0.0, 60.0) is None  # never leader


def test_the_fence_refuses_writes_outside_the_term() -> None:
    now = [0.0]
    fence = WriteFence(clock=lambda: now[0])
    with pytest.raises(NotLeader):
        fence.budget(60.0)  # not leader yet
    fence.extend(10.0)
    assert fence.budget(60.0) == 10.0
    fence.extend(5.0)  # a late reply of an older attempt never shortens the term
    now[0] = 9.0
    assert fence.budget(60.0) == 1.0
    now[0] = 10.0
    with pytest.raises(NotLeader):
        fence.budget(60.0)
    fence.extend(20.0)
    fence.close()
    with pytest.raises(NotLeader):
        fence.budget(60.0)


def _elector(api: KubeApi, identity: str) -> LeaderElector:
    return LeaderElector(
        api,
        namespace="ns",
        name="op",
        identity=identity,
        lease_seconds=LEASE_SECONDS,
        renew_deadline_seconds=RENEW_DEADLINE,
        retry_seconds=RETRY,
    )


def _kube(url: str, identity: str, elector_fence: WriteFence | None = None) -> KubeApi:
    return KubeApi(
        api_client(url, identity), qps=1000, burst=1000, workers=8, metrics=Metrics(), fence=elector_fence
    )


async def _until(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


async def _handover(state: ServerState, url: str, *, writes: bool) -> tuple[float, list[float], list[str]]:
    """A leads (writing pods all the while if ``writes``), its API server turns sick, B takes over.

    Returns when A stepped down, when each of A's pod writes ended, and how each ended.
    """
    lease_a = _kube(url, "a")
    elector_a = _elector(lease_a, "a")
    kube_a = _kube(url, "a", elector_a.fence) if writes else None
    ended: list[float] = []
    outcomes: list[str] = []

    async def write_pods() -> None:
        assert kube_a is not None
        while True:
            try:
                await kube_a.create("ns", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
                outcomes.append("written")
            except NotLeader:
                outcomes.append("refused")
            except OSError:
                outcomes.append("timed out")
            except ApiError:
                outcomes.append("failed")
            ended.append(time.monotonic())
            await asyncio.sleep(0.02)

    writer: list[asyncio.Task[None]] = []

    async def lead() -> None:
        if writes:
            writer.append(asyncio.create_task(write_pods()))
        await asyncio.Event().wait()

    run_a = asyncio.create_task(elector_a.run(lead))
    await _until(lambda: len(state.lease_writes) >= 3 and (not writes or "written" in outcomes))
    lease_b = _kube(url, "b")
    run_b = asyncio.create_task(_elector(lease_b, "b").run(lead))
    await asyncio.sleep(RETRY * 2)  # B has read the Lease held by A
    # Fail fast for most of the renew deadline, then hang: the last attempt starts just before the
    # deadline and its requests never answer.
    state.sick["a"] = Sickness(since=time.monotonic(), fail_for=RENEW_DEADLINE - 0.3)
    await asyncio.wait_for(run_a, timeout=30)
    stepped_down = time.monotonic()
    await _until(lambda: any(holder == "b" for _, holder in state.lease_writes))
    if writes:
        await _until(lambda: outcomes[-3:] == ["refused"] * 3)
    for task in (run_b, *writer):
        task.cancel()
    await asyncio.gather(run_b, *writer, return_exceptions=True)
    for api in (lease_a, lease_b, kube_a):
        if api is not None:
            api.close()
    return stepped_down, ended, outcomes


def test_the_old_leader_steps_down_before_a_standby_can_take_over() -> None:
    with slow_apiserver() as (state, url):
        stepped_down, _, _ = asyncio.run(_handover(state, url, writes=False))
        took_over = state.took_over_at("b")
        last_renewal = max(t for t, holder in state.lease_writes if holder == "a")
        assert took_over >= last_renewal + LEASE_SECONDS  # the standby waited the lease out
        assert stepped_down < took_over, (
            f"two leaders for {stepped_down - took_over:.2f} s: A stepped down "
            f"{stepped_down - last_renewal:.2f} s after its last renewal, B took over after "
            f"{took_over - last_renewal:.2f} s"
        )


def test_no_write_of_the_old_leader_is_sent_or_awaited_once_a_standby_can_take_over() -> None:
    with slow_apiserver() as (state, url):
        _, ended, outcomes = asyncio.run(_handover(state, url, writes=True))
        took_over = state.took_over_at("b")
        arrivals = [t for t, who in state.pod_writes if who == "a"]
        assert "timed out" in outcomes  # writes were in flight when the API server stopped answering
        assert max(arrivals) < took_over, (
            "a write of the old leader reached the API server after the takeover"
        )
        # Every write that was sent had been given up on before the takeover; the ones after were
        # refused without being sent.
        sent_ends = [t for t, how in zip(ended, outcomes, strict=True) if how != "refused"]
        assert max(sent_ends) < took_over
        assert max(sent_ends) < min(t for t, how in zip(ended, outcomes, strict=True) if how == "refused")


class _CancelledWhileRenewing(LeaderElector):
    """Renews at once; on its third attempt the elector's own task is cancelled just as the
    attempt succeeds (an operator shutting down while a renew answers)."""

    task: asyncio.Task[None] | None = None
    attempts = 0

    async def _try_acquire_or_renew(self, deadline: float) -> bool:
        self.attempts += 1
        if self.attempts == 3 and self.task is not None:
            self.task.cancel()
        return True


def test_a_cancel_that_meets_a_finishing_renew_still_stops_the_elector() -> None:
    """asyncio.wait_for (Python 3.11) returns the inner result when the outer task is cancelled
    in the step the inner one finishes, swallowing the cancel: the elector then renewed forever
    and a shutdown (or a test's cleanup) waited for it for ever."""

    async def scenario() -> tuple[bool, int]:
        elector = _CancelledWhileRenewing(
            cast(KubeApi, None),
            namespace="ns",
            name="op",
            identity="a",
            lease_seconds=LEASE_SECONDS,
            renew_deadline_seconds=RENEW_DEADLINE,
            retry_seconds=0.01,
        )

        async def lead() -> None:
            await asyncio.Event().wait()

        elector.task = asyncio.create_task(elector.run(lead))
        try:
            await asyncio.wait_for(asyncio.shield(elector.task), timeout=5)
        except asyncio.CancelledError:
            pass
        except TimeoutError:
            elector.task.cancel()  # the swallowed cancel: stop it for good before failing
            await asyncio.gather(elector.task, return_exceptions=True)
            return False, elector.attempts
        return elector.task.cancelled(), elector.attempts

    stopped, attempts = asyncio.run(scenario())
    assert stopped, f"the elector went on renewing ({attempts} attempts) after it was cancelled"
