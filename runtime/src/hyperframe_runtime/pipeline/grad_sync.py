"""Data-parallel gradient sync: each stage's gradients all-reduced in bounded buckets, overlapped.

At a stage's REDUCE_GRAD point (after its last backward of the frame, ``pipeline.executor``)
:meth:`GradReducer.reduce` scales the stage's gradients by ``1 / (micro-batches x replicas)`` (a
frame is one step on the mean loss) and starts asynchronous all-reduces of them over the
data-parallel group, while the rank's other stages go on computing:

- a gradient of :data:`BUCKET_BYTES` or more is all-reduced in place, in its own storage;
- smaller ones are packed, in order, into flat buckets of at most :data:`BUCKET_BYTES`, and at
  most :data:`MAX_BUCKETS_IN_FLIGHT` of those are in flight at once: starting another first
  waits for the oldest and copies it back. So the memory the sync adds is bounded by that many
  buckets, whatever the stage's size (one flat copy of every gradient would double the
  gradients' memory for a multi-GB stage).

:meth:`GradReducer.finish` waits for the rest at the frame end and copies the packed buckets
back; the wait is the exposed (non-overlapped) DP communication. ``clock`` gives seconds since
the frame start; :meth:`GradReducer.poll` (called after every op) stamps each stage whose
all-reduces have all completed, so their spans can be traced and costed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import torch
import torch.distributed as dist
from torch import nn

__all__ = ["BUCKET_BYTES", "MAX_BUCKETS_IN_FLIGHT", "GradReducer", "buckets_of"]

BUCKET_BYTES: Final = 25 * 2**20
"""Largest packed bucket (torch DDP's default bucket size)."""
MAX_BUCKETS_IN_FLIGHT: Final = 2
"""Packed buckets in flight at once per rank: two, so one is on the wire while the next packs."""


def buckets_of(sizes: list[int], bucket_bytes: int) -> list[list[int]]:
    """Indices of ``sizes`` (bytes, in order) grouped as :class:`GradReducer` sends them: one
    alone when it is ``bucket_bytes`` or more, else packed in order up to ``bucket_bytes``."""
    out: list[list[int]] = []
    packed: list[int] = []
    size = 0
    for i, nbytes in enumerate(sizes):
        if nbytes >= bucket_bytes:
            out.append([i])
            continue
        if packed and size + nbytes > bucket_bytes:
            out.append(packed)
            packed, size = [], 0
        packed.append(i)
        size += nbytes
    if packed:
        out.append(packed)
    return out


@dataclass
class _Work:
    stage: int
    work: Any
    flat: torch.Tensor | None
    """The packed bucket (None: a gradient reduced in place)."""
    grads: list[torch.Tensor]
    began: float


@dataclass
class GradReducer:
    """Scales each stage's gradients and all-reduces them over the data-parallel group."""

    modules: Mapping[int, nn.Module]
    num_microbatches: int
    dp_group: dist.ProcessGroup | None
    dp_size: int
    clock: Callable[[], float] = time.perf_counter
    bucket_bytes: int = BUCKET_BYTES
    max_in_flight: int = MAX_BUCKETS_IN_FLIGHT
    spans: list[tuple[int, float, float]] = field(default_factory=list)
    peak_staging_bytes: int = 0
    """The most bytes of packed buckets alive at once so far (the memory the sync adds)."""
    _pending: list[_Work] = field(default_factory=list)
    _done: dict[int, float] = field(default_factory=dict)
    _began: dict[int, float] = field(default_factory=dict)
    _staging: int = 0

    def reduce(self, stage: int) -> None:
        grads = [p.grad for p in self.modules[stage].parameters() if p.grad is not None]
        if not grads:
            return
        scale = 1.0 / (self.num_microbatches * self.dp_size)
        for g in grads:
            g.mul_(scale)
        if self.dp_group is None:
            return
        self._began.setdefault(stage, self.clock())
        sizes = [g.numel() * g.element_size() for g in grads]
        for group in buckets_of(sizes, self.bucket_bytes):
            members = [grads[i] for i in group]
            if len(members) == 1 and sizes[group[0]] >= self.bucket_bytes:
                work = dist.all_reduce(members[0], group=self.dp_group, async_op=True)
                self._pending.append(_Work(stage, work, None, members, self.clock()))
                continue
            while sum(1 for w in self._pending if w.flat is not None) >= self.max_in_flight:
                self._complete(next(w for w in self._pending if w.flat is not None))
            flat = torch.cat([g.reshape(-1) for g in members])
            self._staging += flat.numel() * flat.element_size()
            self.peak_staging_bytes = max(self.peak_staging_bytes, self._staging)
            work = dist.all_reduce(flat, group=self.dp_group, async_op=True)
            self._pending.append(_Work(stage, work, flat, members, self.clock()))

    def _complete(self, item: _Work) -> None:
        """Wait for ``item``, copy a packed bucket back and free it."""
        item.work.wait()
        if item.flat is not None:
            offset = 0
            for g in item.grads:
                g.copy_(item.flat[offset : offset + g.numel()].view_as(g))
                offset += g.numel()
            self._staging -= item.flat.numel() * item.flat.element_size()
        self._pending.remove(item)
        if not any(w.stage == item.stage for w in self._pending):
            self._done.setdefault(item.stage, self.clock())

    def poll(self) -> None:
        """Stamp the end of every stage whose started all-reduces have all completed."""
        for stage in {w.stage for w in self._pending}:
            works = [w for w in self._pending if w.stage == stage]
            if stage not in self._done and all(
                not w.grads[0].is_cuda and w.work.is_completed() for w in works
            ):
                self._done[stage] = self.clock()

    def finish(self) -> float:
        """Wait for every started all-reduce; return the seconds spent waiting.

        On GPU ``work.wait()`` only orders the compute stream after NCCL's, so the compute stream
        is synchronised too: the figure is the exposed DP time, not just the host's.
        """
        start = time.perf_counter()
        cuda = any(w.grads[0].is_cuda for w in self._pending)
        stages = sorted(self._began)
        while self._pending:
            self._complete(self._pending[0])
        if cuda:
            torch.cuda.current_stream().synchronize()
        self.spans = [(s, self._began[s], self._done.get(s, self.clock())) for s in stages]
        self._done.clear()
        self._began.clear()
        return time.perf_counter() - start
