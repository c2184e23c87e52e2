"""A token bucket for the operator's API client: ``qps`` sustained, ``burst`` at once (client-go's model)."""

from __future__ import annotations

import asyncio
import time

__all__ = ["TokenBucket"]


class TokenBucket:
    def __init__(self, *, qps: float, burst: int) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"qps ({qps}) must be > 0 and burst ({burst}) >= 1")
        self._qps = qps
        self._burst = float(burst)
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._qps)
        self._stamp = now

    async def acquire(self) -> None:
        """Wait until a request may be sent; waiters are served in arrival order."""
        async with self._lock:
            self._refill()
            if self._tokens < 1:
                await asyncio.sleep((1 - self._tokens) / self._qps)
                self._refill()
            self._tokens -= 1
