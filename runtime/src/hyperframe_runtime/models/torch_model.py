"""An ordinary ``torch.nn.Module`` and where it may be cut: what a model factory may return.

A factory named by ``entrypoint.module.name`` (training config: ``model``) may return a
:class:`TorchModel` instead of a hand-written :class:`~hyperframe_runtime.models.spec.ModelSpec`.
The runtime then cuts the module into pipeline stages itself (``models.cutting``), the way
torchtitan's pipeline split does: each stage is a copy of the model that keeps only its own
modules. The factory runs with every parameter created on the meta device, so building the
model costs no memory; each rank then materialises only the parameters of its own stages and
initialises or loads them. See docs/runtime.md, "Bringing your own model".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["TorchModel"]


@dataclass(frozen=True, kw_only=True)
class TorchModel:
    """A plain module, where it may be cut into pipeline stages, its loss and (optionally) data."""

    module: nn.Module
    """The whole model. Its ``forward`` must be a chain over the cut: the modules before the
    repeated blocks (an embedding), the blocks in order, then the modules after them (a norm, a
    head), each called on the previous one's output, as in ``x = self.embed(x); for block in
    self.layers: x = block(x); return self.head(x)``. On a stage, the modules it does not hold
    become ``nn.Identity`` and the blocks it does not hold are removed from their container (the
    rest keep their indices, so iterate over the container rather than index it)."""
    cuts: str | Sequence[str]
    """Where the model may be cut. A string names the container of its repeated blocks (an
    ``nn.ModuleList``, ``nn.Sequential`` or ``nn.ModuleDict``, e.g. ``"layers"``): the runtime may
    cut between any two of its entries, and picks the cut (even or measured, ``layer_split``). A
    list names the cut points themselves, entries of one such container (``["layers.4"]``: a cut
    before ``layers.4``); the runtime cuts only there, so the runs between them are the pieces it
    places. Either way every stage holds at least one piece."""
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    """``(output of the model for one micro-batch, its targets) -> scalar mean loss``."""
    make_batch: Callable[[int, int, int], tuple[torch.Tensor, torch.Tensor]] | None = None
    """Optional: as ``ModelSpec.make_batch``. None: the job names its data (``spec.data``,
    training config ``data_shards``/``data_factory``)."""
    shared: Sequence[str] = ()
    """Modules outside the blocks that every stage keeps (e.g. a rotary-embedding table that
    every block reads). They must hold no parameters."""
    init: Callable[[nn.Module], None] | None = None
    """How one submodule initialises its own weights, called on every submodule of a stage,
    children before parents (as Hugging Face's ``_init_weights``); each call runs with the global
    RNG seeded from the job's ``seed`` and the submodule's name, so a weight does not depend on
    the split. None: ``reset_parameters()`` of every submodule that has one (torch's layers do)."""
    weights: str = ""
    """A local ``.safetensors`` file or a directory of them (``save_pretrained``'s output) to
    load instead of initialising: each rank reads only its stages' tensors, by parameter name."""
    tokens_per_sample: int = 0
    """Tokens in one sample, for the tokens/s metric; 0 when the model has no tokens."""
    vocab_size: int = 0
    """The model's token vocabulary (its embedding's rows): every token id of the job's data must
    be below it, checked at start (``ModelSpec.vocab_size``); 0 = not checked."""
    frame_metrics: Callable[[int], Mapping[str, float]] | None = None
    """Optional: as ``ModelSpec.frame_metrics``."""

    @property
    def cut_points(self) -> tuple[str, ...]:
        """``cuts`` as a tuple (one string: the container itself)."""
        return (self.cuts,) if isinstance(self.cuts, str) else tuple(self.cuts)
