"""Planning off the critical path: the planner runs in a helper process while frames go on.

The planner is pure Python and CPU-bound. In the training process it would stall the frame (or,
in a thread, fight the frame for the GIL), so global rank 0 starts one helper process
(``python -m hyperframe_runtime.pipeline.replanner``, without torch) and sends it
:class:`PlanJob`\\ s over a pipe. The frame loop polls for the answer at each frame boundary and
broadcasts it to every rank (so no rank depends on the planner being deterministic), and the new
plan takes effect at the next frame. This module imports no torch, so the helper starts fast.
"""

from __future__ import annotations

import contextlib
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Orders, Placement
from hyperframe_runtime.schedule.planner import plan

__all__ = ["BackgroundPlanner", "PlanJob", "PlanOutcome", "PlanRequest", "run_job"]


@dataclass(frozen=True)
class PlanRequest:
    """Plan ``name`` on ``placement``: once per entry of ``variants`` ((split backward?, costs))."""

    name: str
    placement: Placement
    variants: tuple[tuple[bool, CostModel], ...]
    memory_limit: float | None = None
    """Per-rank activation budget in the variants' ``costs.activation`` units (bytes when
    measured; ``pipeline.memory``); None = 1F1B's peak on those costs."""


@dataclass(frozen=True)
class PlanJob:
    requests: tuple[PlanRequest, ...]
    num_microbatches: int
    time_budget_s: float

    def to_json(self) -> dict[str, Any]:
        """The job as JSON (a snapshot taken while it plans re-submits it on resume)."""
        return {
            "num_microbatches": self.num_microbatches,
            "time_budget_s": self.time_budget_s,
            "requests": [
                {
                    "name": r.name,
                    "stage_to_rank": list(r.placement.stage_to_rank),
                    "variants": [[split, costs.to_mapping()] for split, costs in r.variants],
                    "memory_limit": r.memory_limit,
                }
                for r in self.requests
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PlanJob:
        return cls(
            requests=tuple(
                PlanRequest(
                    name=str(r["name"]),
                    placement=Placement(tuple(int(x) for x in r["stage_to_rank"])),
                    variants=tuple((bool(split), CostModel.from_mapping(c)) for split, c in r["variants"]),
                    memory_limit=None if r["memory_limit"] is None else float(r["memory_limit"]),
                )
                for r in data["requests"]
            ),
            num_microbatches=int(data["num_microbatches"]),
            time_budget_s=float(data["time_budget_s"]),
        )


@dataclass(frozen=True)
class PlanOutcome:
    """The best variant of one request (shortest predicted makespan)."""

    name: str
    placement: Placement
    orders: Orders
    split_backward: bool
    predicted_makespan: float
    costs: CostModel


def run_job(job: PlanJob) -> tuple[tuple[PlanOutcome, ...], float]:
    """Plan every request of ``job``; returns the outcomes and the seconds it took."""
    start = time.perf_counter()
    outcomes = []
    for request in job.requests:
        best: PlanOutcome | None = None
        for split, costs in request.variants:
            result = plan(
                costs,
                request.placement,
                job.num_microbatches,
                memory_limit=request.memory_limit,
                time_budget_s=job.time_budget_s,
                split_backward=split,
            )
            if best is None or result.predicted_makespan < best.predicted_makespan:
                best = PlanOutcome(
                    request.name, request.placement, result.orders, split, result.predicted_makespan, costs
                )
        if best is not None:
            outcomes.append(best)
    return tuple(outcomes), time.perf_counter() - start


class BackgroundPlanner:
    """One helper process running :func:`run_job`; at most one job in flight."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self._answers: queue.Queue[object] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="planner-reader", daemon=True)
        self._reader.start()
        self.busy = False

    def _read(self) -> None:
        assert self._proc.stdout is not None
        while True:
            try:
                self._answers.put(pickle.load(self._proc.stdout))
            except (EOFError, OSError, pickle.UnpicklingError):
                self._answers.put(EOFError("planner process exited"))
                return

    def submit(self, job: PlanJob) -> None:
        if self.busy:
            raise RuntimeError("a planning job is already running")
        assert self._proc.stdin is not None
        pickle.dump(job, self._proc.stdin)
        self._proc.stdin.flush()
        self.busy = True

    def poll(self) -> tuple[tuple[PlanOutcome, ...], float] | None:
        """The finished job's answer, or None while it runs (never blocks)."""
        try:
            answer = self._answers.get_nowait()
        except queue.Empty:
            return None
        return self._take(answer)

    def wait(self) -> tuple[tuple[PlanOutcome, ...], float]:
        """The running job's answer, waiting for it as long as it takes."""
        if not self.busy:
            raise RuntimeError("no planning job is running")
        return self._take(self._answers.get())

    def _take(self, answer: object) -> tuple[tuple[PlanOutcome, ...], float]:
        self.busy = False
        if isinstance(answer, BaseException):
            raise RuntimeError(f"background planner failed: {answer}") from answer
        done: tuple[tuple[PlanOutcome, ...], float] = answer  # type: ignore[assignment]
        return done

    def close(self) -> None:
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=5)
        if self._proc.stdout is not None:
            self._proc.stdout.close()


def _serve(inp: BinaryIO, out: BinaryIO) -> None:
    while True:
        try:
            job = pickle.load(inp)
        except EOFError:
            return
        answer: object
        try:
            answer = run_job(job)
        except Exception as exc:  # sent back and raised in the training process
            answer = RuntimeError(f"{type(exc).__name__}: {exc}")
        pickle.dump(answer, out)
        out.flush()


def main() -> None:
    """The helper process: answer jobs from stdin on stdout until stdin closes.

    It ignores SIGTERM: torchrun signals a rank's whole process group on preemption, and the
    rank, which stops at its next frame boundary, still polls and then closes this helper (stdin
    closes when the rank exits in any way, SIGKILL included)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    # Run under this module's real name, so answers unpickle as replanner.PlanOutcome (not
    # __main__.PlanOutcome) in the training process.
    from hyperframe_runtime.pipeline import replanner

    replanner.main()
