"""A user model module for the tests: factories that read ``config.model_args``, and broken ones.

``sized(config)`` builds the built-in GPT sized by its arguments (``layers``, ``width``), and records
the arguments it was given on the spec (``ArgsSpec.args``). ``two_args`` has the wrong signature;
``not_a_spec`` returns something else than a ModelSpec; ``NOT_CALLABLE`` is not a function.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.gpt import gpt_model_spec
from hyperframe_runtime.models.spec import ModelSpec

NOT_CALLABLE = 3


@dataclass(frozen=True, kw_only=True)
class ArgsSpec(ModelSpec):
    """The GPT's spec plus the arguments the factory received."""

    args: dict[str, Any]


def sized(config: TrainConfig) -> ModelSpec:
    args = config.model_args
    sized_config = dataclasses.replace(config, n_layers=int(args["layers"]), d_model=int(args["width"]))
    base = gpt_model_spec(sized_config)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(ModelSpec)}
    return ArgsSpec(**fields, args=dict(args))


def two_args(config: TrainConfig, extra: int) -> ModelSpec:
    raise AssertionError("never called: the signature is checked first")


def not_a_spec(config: TrainConfig) -> dict[str, int]:
    return {"layers": 1}
