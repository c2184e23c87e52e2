"""Presets of the built-in example models (a GPT in hyperframe_runtime.models).

A job names a preset in ``spec.entrypoint.builtin.model`` and may override any size parameter;
the resolved config always carries every size parameter, so the runtime never guesses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["BUILTIN_MODELS", "BuiltinName", "ModelSize"]

BuiltinName = Literal["tiny-gpt", "gpt-small", "gpt-medium"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSize:
    layers: int
    hidden_size: int
    heads: int
    vocab_size: int
    seq_len: int


BUILTIN_MODELS: Final[dict[str, ModelSize]] = {
    # Small enough for a CPU demo with gloo in seconds.
    "tiny-gpt": ModelSize(layers=4, hidden_size=64, heads=4, vocab_size=256, seq_len=32),
    # GPT-2 small / medium shapes (vocab padded to a multiple of 64).
    "gpt-small": ModelSize(layers=12, hidden_size=768, heads=12, vocab_size=50304, seq_len=1024),
    "gpt-medium": ModelSize(layers=24, hidden_size=1024, heads=16, vocab_size=50304, seq_len=1024),
}
