"""Models the runtime can train: the interface (:class:`ModelSpec`) and the built-in GPT."""

from hyperframe_runtime.models.spec import ModelSpec, load_model_spec

__all__ = ["ModelSpec", "load_model_spec"]
