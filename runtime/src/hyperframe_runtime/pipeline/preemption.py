"""Stopping at a frame boundary on SIGTERM (Kueue preemption, node drain, pod deletion).

torchrun forwards the SIGTERM the container gets to each rank's process group and gives the
ranks ``--shutdown-timeout`` seconds before SIGKILL. A rank's handler only sets a flag
(:class:`StopFlag`): a frame or a collective in flight runs on. At each frame boundary the frame
loop asks :func:`agree_to_stop`, an all-reduce of the flag, so every rank stops after the same
frame even when only some of them got the signal (one node drained) and no rank is left waiting
in a collective. The loop then writes that frame's snapshot and the trainer exits with
``TrainExit.PREEMPTED``, which the operator restarts without counting it against backoffLimit.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import torch
import torch.distributed as dist

__all__ = ["STOP_SIGNALS", "StopFlag", "agree_to_stop"]

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM,)
"""The signals that stop training at the next frame boundary."""


class StopFlag:
    """Set when this process got a stop signal (or :meth:`request` was called)."""

    def __init__(self) -> None:
        self.signal: signal.Signals | None = None

    @property
    def requested(self) -> bool:
        return self.signal is not None

    def request(self, sig: signal.Signals = signal.SIGTERM) -> None:
        self.signal = sig

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        # Only the flag: the frame loop acts on it at the next frame boundary.
        self.request(signal.Signals(signum))

    @contextmanager
    def installed(self) -> Iterator[StopFlag]:
        """Handle :data:`STOP_SIGNALS` with this flag inside the block (main thread only)."""
        previous = {sig: signal.signal(sig, self._handle) for sig in STOP_SIGNALS}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def agree_to_stop(requested: bool, device: torch.device) -> bool:
    """Whether any rank was asked to stop (collective: every rank calls it at the same boundary)."""
    flag = torch.tensor([1.0 if requested else 0.0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item() > 0)
