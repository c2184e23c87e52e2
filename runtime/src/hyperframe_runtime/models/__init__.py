"""Models the runtime can train: an ordinary module and where to cut it (:class:`TorchModel`),
the hand-split interface (:class:`ModelSpec`), and the built-in GPT."""

from hyperframe_runtime.models.cutting import init_weights
from hyperframe_runtime.models.spec import ModelSpec, TiedWeight, load_model_spec
from hyperframe_runtime.models.torch_model import TorchModel

__all__ = ["ModelSpec", "TiedWeight", "TorchModel", "init_weights", "load_model_spec"]
