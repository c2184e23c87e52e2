"""An ordinary nn.Module, trained by HyperFrame as it is (docs/runtime.md, "Bringing your own model").

From the repository root: ``hyperframe data prepare README.md -o /tmp/own-model-shards``, then
``PYTHONPATH=examples/own-model hyperframe local examples/own-model/job.yaml``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models import TorchModel
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = x + self.down(F.gelu(self.up(self.norm(x))))
        return out


class TinyLM(nn.Module):
    def __init__(self, width: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(256, width)
        self.layers = nn.ModuleList(Block(width) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.layers:
            x = block(x)
        out: torch.Tensor = self.head(self.norm(x))
        return out


def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


def build(config: TrainConfig) -> TorchModel:
    args = config.model_args  # the job's entrypoint.module.args
    return TorchModel(
        module=TinyLM(int(args.get("width", 128)), int(args.get("layers", 8))),
        cuts="layers",  # cut between any two entries of self.layers
        loss_fn=loss,
        tokens_per_sample=config.seq_len,
    )
