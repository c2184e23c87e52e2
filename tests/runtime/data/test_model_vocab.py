"""Data whose token ids do not fit the model's vocabulary is a configuration error.

A user model states its vocabulary (``TorchModel.vocab_size``; the Hugging Face factory takes the
``transformers`` config's ``vocab_size``). Shards are checked at start from their ``meta.json``
(which records the largest token id): ``hyperframe-train`` exits 2 naming the data path, the
largest id, the model's vocab_size and the fix, instead of failing in the embedding with exit 1.
A dataset factory records no maximum, so its first batch is checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from hyperframe_runtime import train
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.data.errors import DataError
from hyperframe_runtime.data.loader import LoaderBatches, check_model_vocab
from hyperframe_runtime.data.order import ReplicaOrder
from hyperframe_runtime.data.prepare import prepare_bytes
from hyperframe_runtime.data.shards import read_meta
from hyperframe_runtime.models.spec import load_model_spec
from torch.utils.data import Dataset

TEXT = "HyperFrame trains on bytes: ünïcödé too.\n" * 40


def _llama(vocab_size: int) -> dict[str, Any]:
    return {
        "config": {
            "model_type": "llama",
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "vocab_size": vocab_size,
            "max_position_embeddings": 64,
        }
    }


@pytest.fixture
def shards(tmp_path: Path) -> Path:
    text = tmp_path / "corpus.txt"
    text.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "shards"
    prepare_bytes([text], out)
    return out


def test_shards_beyond_a_hf_models_vocabulary_exit_2_naming_path_max_id_and_vocab(
    shards: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    top = read_meta(shards).max_token
    assert top >= 64  # the text has bytes above the model's 64 ids
    config = TrainConfig(
        model="hyperframe_runtime.models.hf:causal_lm",
        model_args=_llama(64),
        data_shards=str(shards),
        seq_len=16,
        policy="gpipe",
        frames=1,
        microbatches_per_frame=1,
        micro_batch_size=1,
    )
    path = tmp_path / "train.json"
    path.write_text(config.to_json(), encoding="utf-8")
    for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "0")
    code = train.main(["--config", str(path)])
    err = capsys.readouterr().err
    assert code == 2, err
    for part in (
        f"data.shards: {shards} holds token ids up to {top}",
        "the model's vocab_size is 64",
        f"set vocab_size to at least {top + 1}",
        "entrypoint.module.args.config.vocab_size",
    ):
        assert part in err, err
    # A vocabulary that holds every id passes the same check.
    wide = TrainConfig.from_dict({**json.loads(config.to_json()), "model_args": _llama(top + 1)})
    check_model_vocab(wide, load_model_spec(wide))


class TokenDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Windows of token ``index``, so that the batch's largest id is the largest index read."""

    def __len__(self) -> int:
        return 40

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.full((4,), index), torch.full((4,), index)


def test_a_factory_datasets_first_batch_is_checked_against_the_vocabulary() -> None:
    def batches(vocab_size: int) -> LoaderBatches:
        order = ReplicaOrder(40, 1, 0, seed=3)
        return LoaderBatches(
            TokenDataset(),
            order,
            micro_batch_size=40,
            microbatches=1,
            field="data.factory",
            vocab_size=vocab_size,
        )

    with pytest.raises(DataError, match=r"^data\.factory: the first batch holds token ids up to 39, but"):
        batches(16).next_frame(0)
    inputs, _ = batches(40).next_frame(0)
    assert int(inputs.max()) == 39
