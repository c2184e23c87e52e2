"""A plain ``nn.Module`` factory for the tests: a tiny residual MLP language model and where it may be cut.

``build(config)`` returns a :class:`TorchModel` whose module is an ordinary module (an embedding,
``layers`` of residual blocks, a norm and a head, in a chain) and whose data is a pure function of
the frame (``make_batch``). ``model_args``: ``cuts`` (default ``"layers"``), ``layers`` (default 4).
``counting(config)`` is the same model with an init that counts its calls (:data:`INIT_CALLS`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models import TorchModel
from torch import nn

VOCAB = 32
WIDTH = 16
INIT_CALLS: list[str] = []


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, 2 * WIDTH)
        self.down = nn.Linear(2 * WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = x + self.down(F.gelu(self.up(self.norm(x))))
        return out


class TinyLM(nn.Module):
    def __init__(self, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.layers = nn.ModuleList(Block() for _ in range(layers))
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.layers:
            x = block(x)
        out: torch.Tensor = self.head(self.norm(x))
        return out


def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1))


def batch(config: TrainConfig, frame: int, replica: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1000 * frame + replica)
    start = torch.randint(0, VOCAB, (n, 1), generator=gen)
    tokens = (start + torch.arange(config.seq_len + 1)) % VOCAB  # learnable: next = current + 1
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def build(config: TrainConfig) -> TorchModel:
    args: dict[str, Any] = config.model_args
    return TorchModel(
        module=TinyLM(int(args.get("layers", 4))),
        cuts=args.get("cuts", "layers"),
        loss_fn=loss,
        make_batch=lambda frame, replica, n: batch(config, frame, replica, n),
        tokens_per_sample=config.seq_len,
    )


def counting(config: TrainConfig) -> TorchModel:
    def init(module: nn.Module) -> None:
        INIT_CALLS.append(type(module).__name__)
        reset = getattr(module, "reset_parameters", None)
        if callable(reset):
            reset()

    made = build(config)
    return TorchModel(module=made.module, cuts=made.cuts, loss_fn=loss, make_batch=made.make_batch, init=init)
