"""Dataset factories the data tests name as ``data_factory`` (importable from the test ranks)."""

from __future__ import annotations

import time

import torch
from hyperframe_runtime.config import TrainConfig
from torch.utils.data import Dataset

SLOW_ITEM_S = 0.05


class TokenDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """``size`` token sequences, each a pure function of its index (so any worker reads the same)."""

    def __init__(self, config: TrainConfig, size: int, item_s: float = 0.0) -> None:
        self.vocab, self.seq_len, self.size, self.item_s = config.vocab_size, config.seq_len, size, item_s

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.item_s:
            time.sleep(self.item_s)  # the known cost of reading one item
        tokens = (torch.arange(self.seq_len + 1) * (index % 7 + 1) + index) % self.vocab
        return tokens[:-1], tokens[1:]


def tokens(config: TrainConfig) -> TokenDataset:
    return TokenDataset(config, 97)


def slow_tokens(config: TrainConfig) -> TokenDataset:
    return TokenDataset(config, 97, SLOW_ITEM_S)
