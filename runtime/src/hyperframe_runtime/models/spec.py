"""The interface between a model and the HyperFrame runtime.

A model is handed to the runtime as a :class:`ModelSpec`: how to build each pipeline stage, the loss
of one micro-batch, and the data of one frame. The built-in GPT (``models.gpt``) is one such spec; a
user's own model is another, named in the training config as ``model = "package.module:function"``
where ``function(config: TrainConfig) -> ModelSpec`` reads its own arguments from
``config.model_args`` (the job's ``entrypoint.module.args``). See docs/runtime.md for a worked example.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import torch
from torch import nn

if TYPE_CHECKING:
    from hyperframe_runtime.config import TrainConfig

__all__ = ["ModelLoadError", "ModelSpec", "TiedWeight", "check_split", "load_model_spec"]


@dataclass(frozen=True)
class TiedWeight:
    """One weight that a model holds under several parameter names."""

    names: tuple[str, ...]
    """Its parameter names; the first is its owner (the name an unsplit model reports)."""
    shape: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A model split into pipeline stages, with its loss and data."""

    build_stage: Callable[[int, int], nn.Module]
    """``(stage_index, num_stages) -> module`` of that stage, on the CPU in fp32. It must be
    deterministic (every data-parallel replica builds the same weights) and must not touch the
    global RNG in a way that depends on which stages a rank builds. Stage ``s`` receives the
    output of stage ``s - 1`` as its positional arguments (a tensor or a tuple of tensors); stage 0
    receives the model inputs. Parameter names must be unique across stages (the built-in GPT
    uses global layer indices): checkpoints are keyed by them."""
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    """``(last-stage output of one micro-batch, its targets) -> scalar loss``, the mean over the
    micro-batch. The runtime averages it over the micro-batches of a frame and over data-parallel
    replicas, so one frame equals one step on the whole frame batch. Computed in fp32."""
    make_batch: Callable[[int, int, int], tuple[torch.Tensor, torch.Tensor]]
    """``(frame, replica, num_samples) -> (inputs, targets)``: the samples of one frame for one
    data-parallel replica, batch dimension first. It must depend only on its arguments, so that a
    resumed run sees the same data as an uninterrupted one."""
    tokens_per_sample: int = 0
    """Tokens in one sample, for the tokens/s metric; 0 when the model has no tokens."""
    vocab_size: int = 0
    """The model's token vocabulary: every token id of the job's data must be below it (checked
    at start from the shards' ``meta.json``, and on the first batch of a ``data_factory``
    dataset, as a configuration error); 0 = not checked."""
    num_layers: int = 0
    """Layers the model can be cut between (the built-in GPT: its blocks); 0 = no per-layer hook."""
    build_layers: Callable[[int, int, range], nn.Module] | None = None
    """The per-layer hook: ``(stage_index, num_stages, layers) -> module`` of that stage holding
    exactly the global layers ``layers`` (a non-empty contiguous range of ``0..num_layers-1``),
    plus the model's input part on stage 0 and its output part on the last stage. With it the
    runtime can give stages uneven layer counts (:meth:`build_split`), as the partitioner
    (``schedule.partition``) asks for mixed devices. Same rules as ``build_stage``: deterministic,
    and a layer's parameters and names must not depend on the split."""
    build_empty_layers: Callable[[int, int, range], nn.Module] | None = None
    """Optional: the module :attr:`build_layers` returns, with its parameters allocated but not
    initialised (no init, no weights read). A stage move (another placement or layer split)
    overwrites every parameter with the moved values, so it builds its new stages this way
    instead of initialising (or reloading) the model again; None = ``build_layers``."""
    tied_parameters: tuple[TiedWeight, ...] = ()
    """Parameters that are one weight under several names (GPT-2's token embedding and output
    head). When the names land on different stages, each stage holds a copy: the runtime sums
    the copies' gradients over the pipeline every frame, so they get the same update and stay
    equal (as Megatron-LM does for its embedding group)."""
    frame_metrics: Callable[[int], Mapping[str, float]] | None = None
    """Optional: ``(frames_done) -> {name: value}``, called on global rank 0 after every frame
    (outside the frame time). The values go to TensorBoard as ``user/<name>`` and to
    ``status.progress.metrics``: at most 64 names of at most 63 characters, finite values; the
    runtime keeps the first 64 names in sorted order and logs a warning naming what it dropped."""

    @property
    def has_layer_hook(self) -> bool:
        """Whether the model can be cut between its layers (``build_layers`` and ``num_layers``)."""
        return self.build_layers is not None and self.num_layers >= 1

    def build_split(self, stage: int, boundaries: Sequence[int]) -> nn.Module:
        """Stage ``stage`` of the split where stage s holds layers ``boundaries[s]:boundaries[s+1]``."""
        self.check_split(boundaries)
        assert self.build_layers is not None
        return self.build_layers(stage, len(boundaries) - 1, range(boundaries[stage], boundaries[stage + 1]))

    def check_split(self, boundaries: Sequence[int]) -> None:
        """Raise a ValueError naming the fix unless this model can run the split ``boundaries``."""
        if not self.has_layer_hook:
            raise ValueError(
                "model: an uneven layer split needs ModelSpec.build_layers and num_layers "
                "(the per-layer hook); give them in the model factory"
            )
        check_split(boundaries, self.num_layers)


def check_split(boundaries: Sequence[int], num_layers: int) -> None:
    """Raise a ValueError naming the fix unless ``boundaries`` cut 0..num_layers into non-empty runs."""
    cuts = list(boundaries)
    if (
        len(cuts) < 2
        or cuts[0] != 0
        or cuts[-1] != num_layers
        or any(a >= b for a, b in itertools.pairwise(cuts))
    ):
        raise ValueError(
            f"layer split {cuts}: must rise strictly from 0 to num_layers ({num_layers}), one entry "
            "more than there are stages, so that every stage holds at least one layer"
        )


class ModelLoadError(ValueError):
    """The model the config names cannot be loaded: a configuration error (``hyperframe-train``
    exits 2 and the operator does not restart the gang for it). The message names the module, the
    config field and the fix."""


# The field of the job spec and of the training config that name the factory.
_FIELD: Final = "entrypoint.module.name (training config: model)"


def load_model_spec(config: TrainConfig) -> ModelSpec:
    """The spec ``config.model`` names: the built-in GPT or a user factory ``module:function``,
    called as ``function(config)`` (its free-form arguments are ``config.model_args``). The
    factory runs with parameters created on the meta device (``cutting.meta_parameters``); a
    :class:`~hyperframe_runtime.models.torch_model.TorchModel` it returns is cut into stages
    (``cutting.torch_model_spec``).

    Raises :class:`ModelLoadError` when the module does not import, has no such callable, the
    callable cannot be called with one argument, it returns something else than a TorchModel or a
    ModelSpec, or a TorchModel's cuts, init or weights do not fit the model."""
    if config.model == "gpt":
        from hyperframe_runtime.models.gpt import gpt_model_spec

        return gpt_model_spec(config)
    module_name, _, attr = config.model.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        where = ", ".join(p or "." for p in sys.path[:6])
        raise ModelLoadError(
            f"{_FIELD}: module {module_name!r} does not import ({type(exc).__name__}: {exc}; "
            f"Python looked in {where}); install the package in the framework image, or mount it "
            "and add its folder to PYTHONPATH in spec.env, or correct the module name"
        ) from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        found = "not callable" if hasattr(module, attr) else "missing"
        raise ModelLoadError(
            f"{_FIELD}: {module_name!r} ({getattr(module, '__file__', None) or 'no file'}) has no "
            f"callable {attr!r} ({found}); define `def {attr}(config) -> TorchModel` (or ModelSpec) "
            "there or name the right function after the colon"
        )
    try:
        inspect.signature(factory).bind(config)
    except TypeError as exc:
        raise ModelLoadError(
            f"{_FIELD}: {config.model} cannot be called as {attr}(config) ({exc}); the factory "
            f"takes exactly one argument, the TrainConfig: `def {attr}(config) -> TorchModel` "
            "(its arguments are config.model_args)"
        ) from None
    except ValueError:  # no signature (some builtins): let the call tell
        pass
    from hyperframe_runtime.models.cutting import meta_parameters, torch_model_spec
    from hyperframe_runtime.models.torch_model import TorchModel

    with meta_parameters():  # a TorchModel's module costs no memory until a stage is materialised
        spec = factory(config)
    if isinstance(spec, TorchModel):
        return torch_model_spec(spec, config, f"{_FIELD}: {config.model}(config)")
    if not isinstance(spec, ModelSpec):
        raise ModelLoadError(
            f"{_FIELD}: {config.model}(config) returned {type(spec).__name__}, expected "
            "hyperframe_runtime.models.TorchModel or ModelSpec; return a TorchModel or a ModelSpec"
        )
    return spec
