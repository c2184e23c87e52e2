"""The write fence: the leader's writes are sent only while its term lasts, and cannot outlive it.

A term is what one successful Lease write buys: from the start of the attempt that made it, for
``renew_deadline_seconds`` on this replica's monotonic clock. A standby takes the Lease over only
after it has seen the record unchanged for ``lease_seconds`` (longer), so a term always ends before
anyone else's can begin.

Every write of the leader's API client asks :meth:`WriteFence.budget` right before it is sent (in
the sending thread, after any wait for a token or a free thread): it is refused with
:class:`NotLeader` once the term has ended, and otherwise gets a total HTTP timeout no longer than
what is left of the term. So no request of this replica is still being sent or awaited after the
term ends; the margin ``lease_seconds - renew_deadline_seconds`` covers a request the API server
received just before the end but applies a little later, and a difference in clock rates.

:func:`term_end` and :func:`request_budget` are the pure rules (unit-tested).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

__all__ = ["NotLeader", "WriteFence", "request_budget", "term_end"]


class NotLeader(Exception):
    """A write was refused before sending: this replica's term as leader has ended (or never began)."""


def term_end(attempt_started: float, renew_deadline: float) -> float:
    """Until when a replica may act after a Lease write that an attempt begun at ``attempt_started`` made.

    Counted from the attempt's start, not its reply: the write reached the API server after that
    moment, so a standby starts counting the lease's duration later still.
    """
    return attempt_started + renew_deadline


def request_budget(valid_until: float, now: float, cap: float) -> float | None:
    """The total timeout of a request sent at ``now`` in a term ending at ``valid_until``.

    None when the term has ended (the request must not be sent); otherwise what is left of the term,
    at most ``cap`` (the ordinary request timeout).
    """
    remaining = valid_until - now
    if remaining <= 0:
        return None
    return min(remaining, cap)


class WriteFence:
    """The end of the current term, shared by the elector (which extends it) and the API client."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._valid_until = -math.inf

    @property
    def valid_until(self) -> float:
        """The end of the term on this replica's monotonic clock (-inf: closed)."""
        return self._valid_until

    def extend(self, valid_until: float) -> None:
        """A Lease write succeeded: the term now lasts until ``valid_until`` (never shortened here)."""
        with self._lock:
            self._valid_until = max(self._valid_until, valid_until)

    def close(self) -> None:
        """Leadership is given up: refuse every write from now on."""
        with self._lock:
            self._valid_until = -math.inf

    def budget(self, cap: float) -> float:
        """The timeout for a write sent now; raises :class:`NotLeader` if it must not be sent."""
        budget = request_budget(self._valid_until, self._clock(), cap)
        if budget is None:
            raise NotLeader("not the leader: this replica's Lease term has ended, the write was not sent")
        return budget
