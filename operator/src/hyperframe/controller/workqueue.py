"""A coalescing, rate-limited work queue of job keys, like controller-runtime's.

- a key is queued at most once; events for a key being processed mark it dirty, and it runs again
  right after (so one job is never reconciled by two workers at once);
- delayed adds keep only the earliest deadline per key;
- a reconcile that raises is retried with per-key exponential backoff (0.5 s doubling to 60 s) and
  never stops the workers: one bad object cannot block the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["WorkQueue"]

log = logging.getLogger("hyperframe.controller.workqueue")
K = TypeVar("K", bound=Hashable)

_ERROR_BACKOFF_BASE = 0.5
_ERROR_BACKOFF_MAX = 60.0
_MIN_REQUEUE_SECONDS = 0.05


class WorkQueue(Generic[K]):
    def __init__(
        self,
        work: Callable[[K], Awaitable[float | None]],
        *,
        concurrency: int,
        on_error: Callable[[K, BaseException], None] | None = None,
    ) -> None:
        self._work = work
        self._concurrency = concurrency
        self._on_error = on_error
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._dirty: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._failures: dict[K, int] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def __len__(self) -> int:
        return len(self._queued)

    def add(self, key: K, delay: float = 0.0) -> None:
        if delay > 0:
            self._add_later(key, delay)
            return
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if key in self._active:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def _add_later(self, key: K, delay: float) -> None:
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        timer = self._timers.get(key)
        if timer is not None:
            if timer.when() <= when:
                return
            timer.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def forget(self, key: K) -> None:
        """Drop timers and error history of a key (its object is gone)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._failures.pop(key, None)

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"reconcile-{i}") for i in range(self._concurrency)
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    async def _worker(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            self._active.add(key)
            requeue: float | None = None
            try:
                requeue = await self._work(key)
                self._failures.pop(key, None)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                count = self._failures.get(key, 0) + 1
                self._failures[key] = count
                requeue = min(_ERROR_BACKOFF_BASE * 2 ** (count - 1), _ERROR_BACKOFF_MAX)
                log.warning(
                    "reconcile of %s failed (attempt %d), retrying in %.1fs: %r", key, count, requeue, exc
                )
                if self._on_error is not None:
                    self._on_error(key, exc)
            finally:
                self._active.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                self.add(key)
            elif requeue is not None:
                self.add(key, max(requeue, _MIN_REQUEUE_SECONDS))
            # A reconcile that needed no I/O never yielded; let the watches and other keys run.
            await asyncio.sleep(0)
