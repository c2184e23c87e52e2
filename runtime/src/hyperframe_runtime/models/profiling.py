"""Measure a stage's activation memory: the bytes one micro-batch keeps alive until its backward.

Autograd's saved tensors are what a micro-batch holds between its forward and its backward; the
stage output is held too (the pipeline keeps it to run the backward from the next stage's
gradient), and on the last stage so is what the loss saves. Parameters are not activations and
are left out. Each storage is counted once, so a view saved twice costs its bytes once. The model
inputs are the exception: the runtime cuts a frame's batch into micro-batches as views of one
storage, so a saved view of an input storage counts only its own bytes (its micro-batch's share).

:class:`SavedBytes` is the one implementation: :func:`activation_bytes` (and so
:func:`stage_activation_bytes`) uses it offline, the executor (``pipeline.activation_probe``)
uses it on one micro-batch of each stage in the real run, and ``pipeline.calibration`` puts the
result into ``costs.activation``, so the planner's memory budget is in bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

import torch
from torch import nn

from hyperframe_runtime.models.spec import ModelSpec

__all__ = ["SavedBytes", "activation_bytes", "stage_activation_bytes"]


class SavedBytes:
    """Counts the bytes autograd saves for backward while the context is entered.

    ``module``'s parameters are left out; storages of ``inputs`` (the model's input batch) count
    only the saved views' own bytes. :meth:`add` counts a tensor held outside autograd (the stage
    output). The count is :attr:`total`; entering again keeps counting (the loss after the
    forward).
    """

    def __init__(self, module: nn.Module, inputs: Iterable[Any] = ()) -> None:
        self._params = {p.untyped_storage().data_ptr() for p in module.parameters()}
        self._shared = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor)}
        self._storages: dict[int, int] = {}
        self._views: dict[tuple[int, int], int] = {}
        self._hooks: Any = None

    @property
    def total(self) -> int:
        return sum(self._storages.values()) + sum(self._views.values())

    def add(self, value: Any) -> None:
        """Count ``value`` (a tensor, or a tuple of them; anything else is ignored)."""
        for t in value if isinstance(value, tuple) else (value,):
            if isinstance(t, torch.Tensor):
                self._count(t)

    def _count(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in self._params:
            return
        if ptr in self._shared:
            key = (ptr, int(t.storage_offset()))
            self._views[key] = max(self._views.get(key, 0), t.numel() * t.element_size())
        else:
            self._storages[ptr] = max(self._storages.get(ptr, 0), storage.nbytes())

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        self._count(t)
        return t

    def __enter__(self) -> SavedBytes:
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
        self._hooks.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._hooks.__exit__(kind, exc, tb)
        self._hooks = None


def _unpack(t: torch.Tensor) -> torch.Tensor:
    return t


def activation_bytes(
    module: nn.Module,
    *inputs: Any,
    loss_fn: Callable[[Any, Any], Any] | None = None,
    target: Any = None,
) -> int:
    """Bytes one forward of ``module`` on ``inputs`` (one micro-batch) keeps for its backward;
    with ``loss_fn`` (the last stage) also what ``loss_fn(output, target)`` saves."""
    return _measure(module, *inputs, loss_fn=loss_fn, target=target)[0]


def stage_activation_bytes(
    spec: ModelSpec, num_stages: int, micro_batch_size: int, boundaries: Sequence[int] | None = None
) -> list[int]:
    """Each stage's activation bytes per micro-batch of ``micro_batch_size`` samples: the stages
    are built on the CPU (``boundaries``: an uneven split through the per-layer hook) and one
    micro-batch of frame 0 is passed through them in turn (the last stage with its loss). What
    the executor measures in a real run (on its device and dtype), for ``costs.activation``."""
    inputs, targets = spec.make_batch(0, 0, micro_batch_size)
    x: Any = inputs
    sizes = []
    for stage in range(num_stages):
        module = (
            spec.build_split(stage, boundaries)
            if boundaries is not None
            else spec.build_stage(stage, num_stages)
        )
        if stage > 0:
            x = tuple(_as_input(t) for t in x) if isinstance(x, tuple) else _as_input(x)
        last = stage == num_stages - 1
        size, x = _measure(
            module,
            *(x if isinstance(x, tuple) else (x,)),
            loss_fn=spec.loss_fn if last else None,
            target=targets,
        )
        sizes.append(size)
    return sizes


def _as_input(t: Any) -> Any:
    # What the next stage receives: a leaf that needs a gradient when it is a float tensor.
    if isinstance(t, torch.Tensor):
        return t.detach().requires_grad_(t.is_floating_point())
    return t


def _measure(
    module: nn.Module, *inputs: Any, loss_fn: Callable[[Any, Any], Any] | None, target: Any
) -> tuple[int, Any]:
    counter = SavedBytes(module, (*inputs, target))
    with counter:
        out = module(*inputs)
        if loss_fn is not None:
            loss_fn(out, target)
    counter.add(out)
    return counter.total, out
