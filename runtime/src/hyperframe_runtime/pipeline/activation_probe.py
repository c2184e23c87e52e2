"""Each stage's activation bytes per micro-batch, measured once in the real run.

The executor hands the first F of each of its stages (micro-batch 0 of the first frame after the
stages were built) to :meth:`ActivationProbe.measure`, which counts what that forward saves for
its backward plus the stage output (``models.profiling.SavedBytes``, the same counting as
``activation_bytes``), on the real device, dtype (bf16 autocast on GPU) and micro-batch. On the
last stage the loss that follows the forward is counted too (:meth:`measure_loss`). Once every
stage is measured the executor drops the probe, so later frames pay nothing; the bytes ride in
every frame's records (``RankFrame.activation_bytes``) to the calibration, which makes them
``costs.activation``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from torch import nn

from hyperframe_runtime.models.profiling import SavedBytes

__all__ = ["ActivationProbe"]


class ActivationProbe:
    """Measures one forward of each stage in ``modules`` (see the module docstring)."""

    def __init__(self, modules: Mapping[int, nn.Module], last_stage: int) -> None:
        self._modules = dict(modules)
        self._last_stage = last_stage
        self._inputs: tuple[Any, ...] = ()
        self._pending_loss: SavedBytes | None = None
        self.bytes: dict[int, int] = {}
        """Stage -> measured bytes per micro-batch (complete once :attr:`done`)."""

    @property
    def done(self) -> bool:
        return len(self.bytes) == len(self._modules) and self._pending_loss is None

    def frame_inputs(self, tensors: Iterable[Any]) -> None:
        """The frame's input batch and targets: micro-batches are views of them (count shares)."""
        self._inputs = tuple(tensors)

    def wants(self, stage: int) -> bool:
        return stage in self._modules and stage not in self.bytes

    def measure(self, stage: int, forward: Callable[[], Any]) -> Any:
        """Run ``forward`` (one F of ``stage``) and count what it keeps for the backward."""
        counter = SavedBytes(self._modules[stage], self._inputs)
        with counter:
            output = forward()
        counter.add(output)
        self.bytes[stage] = counter.total
        if stage == self._last_stage:
            self._pending_loss = counter
        return output

    def measure_loss(self, loss: Callable[[], Any]) -> Any:
        """Run ``loss`` (right after a forward); count it into the last stage when that forward
        was the measured one."""
        counter = self._pending_loss
        if counter is None:
            return loss()
        self._pending_loss = None
        with counter:
            result = loss()
        self.bytes[self._last_stage] = counter.total
        return result
