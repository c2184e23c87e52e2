"""The operator's non-API runtime parts: work queue, rate limiter, caches, progress parsing, events."""

from __future__ import annotations

import asyncio
import time

import pytest
from hyperframe.constants import LABEL_GENERATION, LABEL_JOB, LABEL_RANK
from hyperframe.controller.caches import Caches
from hyperframe.controller.events import event_body
from hyperframe.controller.plan import Event, EventType
from hyperframe.controller.policy_progress import read_progress
from hyperframe.controller.progress_server import parse_progress
from hyperframe.controller.ratelimit import TokenBucket
from hyperframe.controller.reconciler import progress_url
from hyperframe.controller.workqueue import WorkQueue


def test_work_queue_coalesces_and_never_runs_one_key_twice_at_once() -> None:
    async def scenario() -> tuple[list[str], int]:
        seen: list[str] = []
        running: set[str] = set()
        overlap = 0

        async def work(key: str) -> float | None:
            nonlocal overlap
            if key in running:
                overlap += 1
            running.add(key)
            seen.append(key)
            await asyncio.sleep(0.02)
            running.discard(key)
            return None

        queue: WorkQueue[str] = WorkQueue(work, concurrency=4)
        queue.start()
        for _ in range(5):
            queue.add("a")  # coalesced into one run
        queue.add("b")
        await asyncio.sleep(0.005)
        queue.add("a")  # arrives while "a" runs: runs once more afterwards
        await asyncio.sleep(0.1)
        await queue.stop()
        return seen, overlap

    seen, overlap = asyncio.run(scenario())
    assert sorted(seen) == ["a", "a", "b"]
    assert overlap == 0


def test_work_queue_retries_errors_with_backoff_and_keeps_other_keys_going() -> None:
    async def scenario() -> dict[str, int]:
        calls = {"bad": 0, "good": 0}

        async def work(key: str) -> float | None:
            calls[key] += 1
            if key == "bad":
                raise RuntimeError("broken object")
            return None

        errors: list[str] = []
        queue: WorkQueue[str] = WorkQueue(work, concurrency=1, on_error=lambda k, e: errors.append(k))
        queue.start()
        queue.add("bad")
        queue.add("good")
        await asyncio.sleep(0.7)  # bad: at 0, then after 0.5 s backoff; good runs in between
        await queue.stop()
        assert errors == ["bad"] * calls["bad"]
        return calls

    calls = asyncio.run(scenario())
    assert calls["good"] == 1
    assert calls["bad"] == 2


def test_work_queue_delayed_add_keeps_the_earliest_deadline() -> None:
    async def scenario() -> list[float]:
        stamps: list[float] = []
        start = time.monotonic()

        async def work(key: str) -> float | None:
            stamps.append(time.monotonic() - start)
            return None

        queue: WorkQueue[str] = WorkQueue(work, concurrency=1)
        queue.start()
        queue.add("a", 5.0)
        queue.add("a", 0.05)
        queue.add("a", 1.0)
        await asyncio.sleep(0.3)
        await queue.stop()
        return stamps

    stamps = asyncio.run(scenario())
    assert len(stamps) == 1 and stamps[0] < 0.3


def test_token_bucket_allows_a_burst_then_the_rate() -> None:
    async def scenario() -> float:
        bucket = TokenBucket(qps=50, burst=5)
        start = time.monotonic()
        for _ in range(10):
            await bucket.acquire()
        return time.monotonic() - start

    elapsed = asyncio.run(scenario())
    assert elapsed >= 5 / 50 * 0.9  # 5 from the burst, 5 more at 50/s


def _pod(name: str, job: str, *, rv: str, phase: str = "Running", node: str = "n1") -> dict[str, object]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": rv,
            "labels": {LABEL_JOB: job, LABEL_RANK: "0", LABEL_GENERATION: "0"},
        },
        "spec": {"nodeName": node},
        "status": {"phase": phase},
    }


def test_caches_index_pods_by_job_ignore_older_copies_and_count_phases() -> None:
    caches = Caches()
    assert caches.pod_event(None, _pod("p", "j", rv="10")) == ("ns", "j")
    assert caches.pod_event(None, _pod("p", "j", rv="5", phase="Pending")) is None  # older copy
    assert [p.phase for p in caches.pods_of(("ns", "j"))] == ["Running"]
    assert caches.pod_count("Running") == 1
    found = caches.pod("ns", "p", "j")
    assert found is not None and found[1] == "uid-p"
    assert caches.pod("ns", "p", "other-job") is None
    caches.pod_event("DELETED", _pod("p", "j", rv="11"))
    assert caches.pods_of(("ns", "j")) == [] and caches.pod_count("Running") == 0


def test_caches_report_jobs_on_a_node_whose_readiness_changed() -> None:
    caches = Caches()
    caches.pod_event(None, _pod("p", "j", rv="1", node="n1"))

    def node(ready: str) -> dict[str, object]:
        return {"metadata": {"name": "n1"}, "status": {"conditions": [{"type": "Ready", "status": ready}]}}

    assert caches.node_event(None, node("True")) == {("ns", "j")}
    assert caches.node_event("MODIFIED", node("True")) == set()
    assert caches.node_event("MODIFIED", node("False")) == {("ns", "j")}


def test_job_cache_keeps_the_newer_object() -> None:
    caches = Caches()
    caches.put_job(
        {"metadata": {"namespace": "ns", "name": "j", "resourceVersion": "7"}, "status": {"phase": "Running"}}
    )
    caches.put_job(
        {"metadata": {"namespace": "ns", "name": "j", "resourceVersion": "6"}, "status": {"phase": "Pending"}}
    )
    assert caches.jobs[("ns", "j")]["status"]["phase"] == "Running"


def test_progress_parsing_accepts_the_runtime_fields_and_names_bad_ones() -> None:
    ok = parse_progress(
        {"frame": 3, "totalFrames": 10, "step": 3, "loss": 1.5, "samplesPerSecond": 9, "etaSeconds": 1}
    )
    assert ok == {
        "frame": 3,
        "totalFrames": 10,
        "step": 3,
        "loss": 1.5,
        "samplesPerSecond": 9.0,
        "etaSeconds": 1.0,
    }
    assert "loss" not in parse_progress({"frame": 1, "loss": float("nan")})
    for bad, line in (
        ({"frame": "x"}, 'frame: expected an integer, got string "x": use an integer >= 0'),
        ({"frame": -1}, "frame: -1 is below the minimum 0: use a value >= 0"),
        ({"etaSeconds": -2}, "etaSeconds: -2 is below the minimum 0: use a value >= 0"),
        ([1, 2], "expected an object, got a list: write a mapping of fields"),
    ):
        with pytest.raises(ValueError) as refused:
            parse_progress(bad)
        assert str(refused.value) == line


def test_a_refused_report_names_every_bad_field_and_the_good_ones_survive_reading() -> None:
    report = {"frame": 2.5, "step": 4, "totalFrames": -1, "metrics": {"a": float("inf"), "b": 1}}
    with pytest.raises(ValueError) as refused:
        parse_progress(report)
    assert str(refused.value).splitlines() == [
        "frame: expected an integer, got number 2.5: use an integer >= 0",
        "totalFrames: -1 is below the minimum 0: use a value >= 0",
        "metrics.a: inf is not a finite number: use a finite number",
    ]
    progress, errors = read_progress(report)
    assert progress == {"step": 4, "metrics": {"b": 1.0}}
    assert [e.path for e in errors] == ["frame", "totalFrames", "metrics.a"]


def test_progress_url_and_event_shape() -> None:
    assert (
        progress_url("http://op:8081/", "ns", "j")
        == "http://op:8081/v1/namespaces/ns/hyperframejobs/j/progress"
    )
    job = {"metadata": {"name": "j", "namespace": "ns", "uid": "u", "resourceVersion": "3"}}
    body = event_body(job, Event(type=EventType.WARNING, reason="PodFailed", message="x" * 5000))
    assert body["involvedObject"]["uid"] == "u" and body["type"] == "Warning"
    assert len(body["message"]) == 1024 and body["metadata"]["generateName"] == "j."


def test_a_key_that_asks_to_run_again_at_once_cannot_starve_the_loop() -> None:
    async def scenario() -> tuple[int, bool]:
        spins = 0
        other_ran = asyncio.Event()

        async def work(key: str) -> float | None:
            nonlocal spins
            if key == "spinner":
                spins += 1
                return 0.0  # no I/O and "again now": must not monopolise the event loop
            other_ran.set()
            return None

        queue: WorkQueue[str] = WorkQueue(work, concurrency=1)
        queue.start()
        queue.add("spinner")
        await asyncio.sleep(0.01)
        queue.add("other")
        await asyncio.wait_for(other_ran.wait(), timeout=1)
        await asyncio.sleep(0.2)
        await queue.stop()
        return spins, other_ran.is_set()

    spins, other_ran = asyncio.run(scenario())
    assert other_ran
    assert spins < 20, f"the key was re-run {spins} times in 0.2 s"
