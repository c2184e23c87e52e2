"""A Hugging Face causal LM for the runtime's trainer: a tiny Llama built from its config.

    entrypoint.module.name: user_project.hf_model:build     (examples/user-project/job-hf.yaml)

``build(config)`` hands a ``transformers`` Llama configuration to the runtime's Hugging Face
factory, ``hyperframe_runtime.models.hf:causal_lm``, which returns a ``TorchModel`` that the
runtime cuts into pipeline stages between its decoder layers. The job's
``entrypoint.module.args`` override entries of :data:`TINY_LLAMA` (``{num_hidden_layers: 8}``,
for instance); the vocabulary is the 256 byte ids that ``hyperframe data prepare`` writes, and
the positions cover the job's ``entrypoint.module.seqLen`` (``config.seq_len``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models import TorchModel
from hyperframe_runtime.models.hf import causal_lm

__all__ = ["TINY_LLAMA", "build"]

TINY_LLAMA: Final[dict[str, Any]] = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
}
"""The model's ``transformers`` configuration: 4 decoder layers of width 64 over byte tokens."""


def build(config: TrainConfig) -> TorchModel:
    """The tiny Llama, sized by ``TINY_LLAMA`` and the job's ``entrypoint.module.args``."""
    llama = {**TINY_LLAMA, "max_position_embeddings": config.seq_len, **config.model_args}
    return causal_lm(dataclasses.replace(config, model_args={"config": llama}))
