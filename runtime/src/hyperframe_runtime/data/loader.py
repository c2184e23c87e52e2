"""The batches of each frame: from the model's ``make_batch`` or from a dataset through a DataLoader.

The frame loop asks its :class:`BatchSource` for the next frame's batch inside the frame timer,
so the time spent waiting for data is part of the frame time (``data_wait_s``), and saves the
source's :meth:`~BatchSource.state` in every snapshot. Which source a config names:

- ``data_shards`` (a directory of token shards, ``data.shards``) or ``data_factory``
  (``package.module:function`` returning a map-style ``torch.utils.data.Dataset`` of
  ``(inputs, targets)`` tensors): a :class:`LoaderBatches` over that dataset;
- neither: :class:`SpecBatches`, the model's own ``make_batch`` (the built-in GPT's synthetic
  tokens), a pure function of the frame index.

:class:`LoaderBatches` reads one micro-batch per DataLoader batch, in the order of
``data.order.ReplicaOrder`` (a disjoint part per data-parallel replica), with ``data_workers``
worker processes each keeping ``data_prefetch`` batches in flight, so that the next frame's samples
are read while this frame computes. Its position (samples this replica has consumed) counts the
batches the frame loop took, not those the workers prefetched, so a snapshot resumes exactly at the
next unread sample.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable, Iterator, Sized
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from hyperframe_runtime.data.errors import DataError
from hyperframe_runtime.data.order import ReplicaOrder, ReplicaSampler
from hyperframe_runtime.data.shards import ShardDataset, check_vocab, read_meta

if TYPE_CHECKING:
    from hyperframe_runtime.config import TrainConfig
    from hyperframe_runtime.models.spec import ModelSpec

__all__ = [
    "BatchSource",
    "LoaderBatches",
    "SpecBatches",
    "check_data_source",
    "check_model_vocab",
    "import_factory",
    "open_batches",
    "open_dataset",
    "timed",
]

Batch = tuple[torch.Tensor, torch.Tensor]


class BatchSource(Protocol):
    """Where one replica's frame batches come from."""

    def next_frame(self, frame: int) -> Batch:
        """``(inputs, targets)`` of frame ``frame`` (0-based), batch dimension first."""
        ...

    def state(self) -> dict[str, Any]:
        """What a snapshot saves to resume at the next frame ({} when the frame index suffices)."""
        ...

    def close(self) -> None: ...


class SpecBatches:
    """The model's ``make_batch(frame, replica, samples)``: stateless."""

    def __init__(self, make_batch: Callable[[int, int, int], Batch], *, replica: int, samples: int) -> None:
        self._make_batch, self._replica, self._samples = make_batch, replica, samples

    def next_frame(self, frame: int) -> Batch:
        return self._make_batch(frame, self._replica, self._samples)

    def state(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


class LoaderBatches:
    """A frame of ``microbatches`` DataLoader batches of ``micro_batch_size`` samples each."""

    def __init__(
        self,
        dataset: Dataset[Any],
        order: ReplicaOrder,
        *,
        micro_batch_size: int,
        microbatches: int,
        workers: int = 0,
        prefetch: int = 2,
        pin_memory: bool = False,
        field: str = "data",
        state: dict[str, Any] | None = None,
        vocab_size: int = 0,
    ) -> None:
        self.order = order
        self.position = order.position_from(state) if state else 0
        """Samples this replica has consumed (the next one to read is at this position)."""
        self._microbatches, self._field = microbatches, field
        self._micro_batch_size = micro_batch_size
        self._loader = DataLoader(
            dataset,
            batch_size=micro_batch_size,
            sampler=ReplicaSampler(order, self.position),
            num_workers=workers,
            prefetch_factor=prefetch if workers else None,
            pin_memory=pin_memory,
            worker_init_fn=_leave_the_ranks_process_group if workers else None,
        )
        self._batches: Iterator[Any] | None = None
        self._vocab_size = vocab_size
        """The model's vocabulary that the first frame's token ids are checked against; 0 = none."""

    def next_frame(self, frame: int) -> Batch:
        if self._batches is None:  # workers start with the first frame, not at construction
            self._batches = iter(self._loader)
        parts = [self._pair(next(self._batches)) for _ in range(self._microbatches)]
        self.position += self._microbatches * self._micro_batch_size
        batch = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        if self._vocab_size:
            self._check_vocab(batch)
            self._vocab_size = 0  # the first batch only: the dataset has no recorded maximum
        return batch

    def _check_vocab(self, batch: Batch) -> None:
        ids = [t for t in batch if not t.is_floating_point() and not t.is_complex() and t.numel()]
        top = max((int(t.max()) for t in ids), default=-1)
        if top >= self._vocab_size:
            raise DataError(
                f"{self._field}: the first batch holds token ids up to {top}, but the model's "
                f"vocab_size is {self._vocab_size}; give the model a vocabulary of at least "
                f"{top + 1} ({_VOCAB_FIX}), or return token ids below {self._vocab_size}"
            )

    def _pair(self, batch: Any) -> Batch:
        if (
            not isinstance(batch, list | tuple)
            or len(batch) != 2
            or not all(isinstance(t, torch.Tensor) for t in batch)
        ):
            raise DataError(
                f"{self._field}: a dataset item must be a pair (inputs, targets) of tensors, got a "
                f"batch of {type(batch).__name__}; return (inputs, targets) from __getitem__"
            )
        return batch[0], batch[1]

    def state(self) -> dict[str, Any]:
        return self.order.state(self.position)

    def close(self) -> None:
        self._batches = None  # the iterator's finalizer stops the workers


def _leave_the_ranks_process_group(_worker_id: int) -> None:
    """A DataLoader worker leaves its rank's process group. On preemption torchrun sends SIGTERM to
    each rank's whole group; the rank stops at the next frame boundary and still reads that frame's
    batches, so its workers must not die of the signal. The rank stops them itself when it closes
    its loader, and they exit on their own when the rank dies (the DataLoader's parent watchdog)."""
    os.setpgid(0, 0)


def import_factory(name: str, *, field: str = "data.factory") -> Callable[..., Any]:
    """The callable ``package.module:function`` names; a :class:`DataError` when it does not import."""
    module_name, _, attr = name.partition(":")
    if not module_name or not attr:
        raise DataError(f"{field}: {name!r} must be 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise DataError(
            f"{field}: cannot import {module_name!r} ({exc}); install the package in the image (or "
            "mount it and add it to PYTHONPATH) or fix the name"
        ) from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise DataError(
            f"{field}: {module_name!r} has no callable {attr!r}; name the Dataset factory function"
        )
    return factory  # type: ignore[no-any-return]


def check_data_source(config: TrainConfig) -> None:
    """The checks that need no process group: the shards directory (format, dtype, vocabulary of
    the built-in GPT) or the factory's import. Raises :class:`DataError` (a config error)."""
    if config.data_shards:
        meta = read_meta(config.data_shards)
        if config.model == "gpt":
            check_vocab(meta, config.vocab_size)
        if sum(meta.samples_per_shard(config.seq_len)) == 0:
            raise DataError(
                f"data.shards: {config.data_shards} has no shard of more than seq_len ({config.seq_len}) "
                "tokens, so no sample; prepare more text or lower seq_len"
            )
    elif config.data_factory:
        import_factory(config.data_factory)


_VOCAB_FIX = (
    "the model's vocabulary: entrypoint.module.args.config.vocab_size for "
    "hyperframe_runtime.models.hf:causal_lm, TorchModel.vocab_size's module otherwise"
)


def check_model_vocab(config: TrainConfig, spec: ModelSpec) -> None:
    """Every token id of the shards below the model's ``vocab_size`` (``ModelSpec.vocab_size``,
    0 = not checked), from their ``meta.json``: a :class:`DataError` naming the path, the largest
    token id, the vocabulary and the fix, before any stage runs."""
    if config.data_shards and spec.vocab_size > 0 and config.model != "gpt":  # gpt: check_data_source
        check_vocab(read_meta(config.data_shards), spec.vocab_size, fix=_VOCAB_FIX)


def open_dataset(config: TrainConfig, *, vocab_size: int = 0) -> Dataset[Any]:
    """The dataset ``config`` names (``data_shards`` or ``data_factory``); ``vocab_size`` > 0:
    the model's vocabulary, which every window of the shards is checked against."""
    if config.data_shards:
        check_data_source(config)
        meta = read_meta(config.data_shards)
        return ShardDataset(meta, config.seq_len, vocab_size=vocab_size)
    dataset = import_factory(config.data_factory)(config)
    if isinstance(dataset, IterableDataset):
        raise DataError(
            f"data.factory: {config.data_factory}(config) returned an IterableDataset, whose position "
            "cannot be saved and split over replicas exactly; return a map-style Dataset "
            "(__len__ and __getitem__)"
        )
    if not isinstance(dataset, Dataset) or not isinstance(dataset, Sized):
        raise DataError(
            f"data.factory: {config.data_factory}(config) returned {type(dataset).__name__}; return a "
            "map-style torch.utils.data.Dataset with __len__ and __getitem__"
        )
    return dataset


def open_batches(
    config: TrainConfig,
    spec: ModelSpec,
    *,
    replica: int,
    pin_memory: bool = False,
    state: dict[str, Any] | None = None,
) -> BatchSource:
    """This replica's batch source for ``config`` (``state``: what a snapshot saved)."""
    samples = config.microbatches_per_frame * config.micro_batch_size
    if not (config.data_shards or config.data_factory):
        return SpecBatches(spec.make_batch, replica=replica, samples=samples)
    dataset = open_dataset(config, vocab_size=spec.vocab_size)
    field = "data.shards" if config.data_shards else "data.factory"
    order = ReplicaOrder(len(dataset), config.data, replica, config.seed)  # type: ignore[arg-type]
    return LoaderBatches(
        dataset,
        order,
        micro_batch_size=config.micro_batch_size,
        microbatches=config.microbatches_per_frame,
        workers=config.data_workers,
        prefetch=config.data_prefetch,
        pin_memory=pin_memory,
        field=field,
        state=state,
        vocab_size=0 if config.data_shards else spec.vocab_size,  # shards: checked from meta.json
    )


def timed(source: BatchSource, frame: int) -> tuple[Batch, float]:
    """The frame's batch and the seconds spent waiting for it."""
    began = time.perf_counter()
    batch = source.next_frame(frame)
    return batch, time.perf_counter() - began
