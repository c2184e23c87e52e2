"""The progress endpoint's writes are fenced: a write decided before the verdict never lands on a
finished job, so the final figures the reconcile wrote stay.

The real ProgressServer's flush against a stand-in API that behaves like the server for one
object: a merge patch with a stale resourceVersion fails with 409, one without any always lands.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

from hyperframe.controller.caches import Caches
from hyperframe.controller.config import OperatorConfig
from hyperframe.controller.kube import Conflict
from hyperframe.controller.metrics import Metrics
from hyperframe.controller.progress_server import ProgressServer

KEY = ("ns", "j")


class OneJobApi:
    """One HyperFrameJob with a resourceVersion that moves on every write, as the API server's does."""

    def __init__(self, phase: str) -> None:
        self.job: dict[str, Any] = {
            "metadata": {"namespace": "ns", "name": "j", "resourceVersion": "5"},
            "status": {"phase": phase, "progress": {"frame": 0}},
        }
        self.progress_writes = 0

    def write(self, status: Mapping[str, Any]) -> dict[str, Any]:
        self.job["status"] = {**self.job["status"], **status}
        self.job["metadata"]["resourceVersion"] = str(int(self.job["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(self.job)

    async def patch_job_status(
        self, namespace: str, name: str, status: Mapping[str, Any], *, resource_version: str | None
    ) -> dict[str, Any]:
        if resource_version is not None and resource_version != self.job["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        self.progress_writes += "progress" in status
        return self.write(status)

    async def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.job)


def _server(api: OneJobApi, caches: Caches) -> ProgressServer:
    config = OperatorConfig(progress_flush_seconds=0.01, status_port=0)
    return ProgressServer(kube=api, caches=caches, config=config, metrics=Metrics())  # type: ignore[arg-type]


async def _flushed(server: ProgressServer) -> None:
    for _ in range(200):
        if not server._flushers:  # the pending flush tasks, awaited by the test
            return
        await asyncio.gather(*list(server._flushers.values()), return_exceptions=True)
    raise AssertionError("progress flushes never settled")


def test_a_progress_write_decided_before_the_verdict_does_not_overwrite_the_final_figures() -> None:
    async def scenario() -> None:
        api, caches = OneJobApi("Running"), Caches()
        caches.put_job(copy.deepcopy(api.job))  # the endpoint's view: Running, resourceVersion 5
        server = _server(api, caches)
        final = {"frame": 20, "loss": 1.25}
        api.write({"phase": "Succeeded", "progress": final})  # the reconcile's verdict, not seen yet
        server._accept(KEY, {"frame": 19, "loss": 9.0})  # a post accepted just before
        await _flushed(server)
        assert api.job["status"]["progress"] == final, "a stale progress write overwrote the final figures"
        assert api.progress_writes == 0
        assert caches.jobs[KEY]["status"]["phase"] == "Succeeded", "the 409 refreshed the endpoint's view"

    asyncio.run(scenario())


def test_an_unraced_progress_write_lands_and_refreshes_the_cache() -> None:
    async def scenario() -> None:
        api, caches = OneJobApi("Running"), Caches()
        caches.put_job(copy.deepcopy(api.job))
        server = _server(api, caches)
        server._accept(KEY, {"frame": 3})
        await _flushed(server)
        assert api.job["status"]["progress"] == {"frame": 3} and api.progress_writes == 1
        assert caches.jobs[KEY]["metadata"]["resourceVersion"] == api.job["metadata"]["resourceVersion"]
        server._accept(KEY, {"frame": 4})  # the next write uses the fresh version
        await _flushed(server)
        assert api.job["status"]["progress"] == {"frame": 4} and api.progress_writes == 2

    asyncio.run(scenario())
