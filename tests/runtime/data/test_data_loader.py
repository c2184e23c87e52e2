"""The data path without a process group: shard format and its checks, ``hyperframe data
prepare``, the per-replica order, the DataLoader source's exact resume with workers, and bad
input as config errors (``hyperframe-train`` exits 2 naming the field, the path and the fix)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hyperframe.cli import main as hyperframe_main
from hyperframe_runtime import train
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.data.errors import DataError
from hyperframe_runtime.data.loader import LoaderBatches
from hyperframe_runtime.data.order import ReplicaOrder
from hyperframe_runtime.data.prepare import prepare_bytes
from hyperframe_runtime.data.shards import ShardDataset, read_meta
from torch.utils.data import Dataset

TEXT = "HyperFrame trains on bytes: ünïcödé too.\n" * 40


class IndexDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Item i is (i, -i): which sample was read is visible in the batch."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.tensor([index]), torch.tensor([-index])


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def test_prepare_round_trips_the_bytes_through_the_shards(text_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "shards"
    assert hyperframe_main(["data", "prepare", str(text_file), "-o", str(out), "--shard-tokens", "500"]) == 0
    meta = read_meta(out)
    raw = text_file.read_bytes()
    assert meta.dtype == "uint16" and meta.tokenizer == "byte" and meta.max_token == max(raw)
    assert [s.tokens for s in meta.shards] == [500] * (len(raw) // 500) + [len(raw) % 500]
    tokens = np.concatenate([np.fromfile(out / s.file, dtype="<u2") for s in meta.shards])
    assert bytes(tokens.astype(np.uint8)) == raw
    # A sample is seq_len + 1 consecutive tokens of one shard: inputs and targets shifted by one.
    inputs, targets = ShardDataset(meta, 16)[3]
    assert bytes(inputs.tolist()) == raw[48:64] and bytes(targets.tolist()) == raw[49:65]
    # Prepare never overwrites shards.
    assert hyperframe_main(["data", "prepare", str(text_file), "-o", str(out)]) == 2


def test_replicas_read_disjoint_parts_of_every_epoch() -> None:
    orders = [ReplicaOrder(num_samples=11, replicas=3, replica=r, seed=4) for r in range(3)]
    for epoch in range(3):
        parts = [{o.index(epoch * o.per_replica + k) for k in range(o.per_replica)} for o in orders]
        assert all(len(p) == 3 for p in parts)
        assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    # Epochs are reshuffled, and the order is a pure function of (seed, position).
    again = ReplicaOrder(num_samples=11, replicas=3, replica=0, seed=4)
    assert [orders[0].index(p) for p in range(9)] == [again.index(p) for p in range(9)]
    assert [orders[0].index(p) for p in range(3)] != [orders[0].index(p) for p in range(3, 6)]


@pytest.mark.parametrize("workers", [0, 2])
def test_each_replicas_loader_reads_its_own_samples(workers: int) -> None:
    dataset = IndexDataset(64)
    seen = []
    for replica in range(2):
        loader = LoaderBatches(
            dataset,
            ReplicaOrder(64, 2, replica, seed=1),
            micro_batch_size=2,
            microbatches=4,
            workers=workers,
        )
        seen.append({int(i) for frame in range(4) for i in loader.next_frame(frame)[0]})
        loader.close()
    assert len(seen[0]) == len(seen[1]) == 32 and not seen[0] & seen[1]


def _frames(loader: LoaderBatches, frames: range) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [loader.next_frame(f) for f in frames]


@pytest.mark.parametrize("source", ["shards", "factory"])
def test_a_loader_resumed_from_its_state_reads_the_same_next_samples(
    source: str, text_file: Path, tmp_path: Path
) -> None:
    dataset: Dataset[Any] = (
        ShardDataset(prepare_bytes([text_file], tmp_path / "shards", shard_tokens=300), 8)
        if source == "shards"
        else IndexDataset(40)
    )
    order = ReplicaOrder(len(dataset), 1, 0, seed=3)  # type: ignore[arg-type]

    def loader(state: dict[str, Any] | None = None) -> LoaderBatches:
        # 3 micro-batches of 3: frames do not align with epochs, workers prefetch past the frame.
        return LoaderBatches(
            dataset, order, micro_batch_size=3, microbatches=3, workers=2, prefetch=2, state=state
        )

    whole = loader()
    expected = _frames(whole, range(12))
    whole.close()
    first = loader()
    _frames(first, range(5))
    state = first.state()
    first.close()
    assert state["position"] == 5 * 9
    resumed = loader(json.loads(json.dumps(state)))  # as meta.json stores it
    got = _frames(resumed, range(5, 12))
    resumed.close()
    for (x, y), (ex, ey) in zip(got, expected[5:], strict=True):
        assert torch.equal(x, ex) and torch.equal(y, ey)


def test_a_position_saved_on_another_order_is_refused() -> None:
    state = ReplicaOrder(40, 2, 0, seed=3).state(8)
    with pytest.raises(DataError, match=r"parallelism\.data"):
        LoaderBatches(
            IndexDataset(40), ReplicaOrder(40, 1, 0, seed=3), micro_batch_size=1, microbatches=1, state=state
        )


def _train_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], **config: Any
) -> tuple[int, str]:
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"frames": 1, **config}), encoding="utf-8")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    code = train.main(["--config", str(path)])
    return code, capsys.readouterr().err


def _edit_meta(root: Path, **changes: Any) -> None:
    meta = json.loads((root / "meta.json").read_text())
    (root / "meta.json").write_text(json.dumps({**meta, **changes}))


def test_every_bad_meta_field_is_named_at_once_as_path_problem_fix(text_file: Path, tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    prepare_bytes([text_file], shards)
    _edit_meta(shards, vocab_size=0, shards=[{"file": "../x.bin", "tokens": -1}])
    with pytest.raises(DataError) as refused:
        read_meta(shards)
    meta = shards / "meta.json"
    fix = "(or write the shards there with `hyperframe data prepare TEXT... -o DIR`)"
    assert str(refused.value).splitlines() == [
        f"data.shards: {meta}: vocab_size: 0 is below the minimum 1: use a value >= 1 {fix}",
        f'data.shards: {meta}: shards[0].file: "../x.bin" is not a plain file name (no directory): '
        f"use a plain file name (no directory), e.g. shard-000000.bin {fix}",
        f"data.shards: {meta}: shards[0].tokens: -1 is below the minimum 0: use a value >= 0 {fix}",
    ]


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", ["data.shards:", "is not a directory", "hyperframe data prepare"]),
        ("empty", ["data.shards:", "has no meta.json", "hyperframe data prepare"]),
        (
            "dtype",
            ["data.shards:", 'meta.json: dtype: unknown value string "int8": use one of uint16, uint32'],
        ),
        ("size", ["data.shards:", "bytes", "the dtype or the file is wrong"]),
        ("vocab", ["data.shards:", "token ids up to", "set vocab_size to at least"]),
        ("factory", ["data.factory:", "cannot import 'no_such_package.data'", "install the package"]),
    ],
)
def test_bad_data_input_is_a_config_error(
    case: str,
    expected: list[str],
    text_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shards = tmp_path / "shards"
    config: dict[str, Any] = {"data_shards": str(shards)}
    if case == "empty":
        shards.mkdir()
    elif case in ("dtype", "size", "vocab"):
        prepare_bytes([text_file], shards)
        if case == "dtype":
            _edit_meta(shards, dtype="int8")
        elif case == "size":
            _edit_meta(shards, dtype="uint32")
        else:
            config["vocab_size"] = 64  # the text has bytes above 63
    elif case == "factory":
        config = {"data_factory": "no_such_package.data:make"}
    code, err = _train_exit(tmp_path, monkeypatch, capsys, **config)
    assert code == 2
    for part in expected:
        assert part in err
    if case != "factory":
        assert str(shards) in err


def test_config_takes_one_data_source() -> None:
    with pytest.raises(ValueError, match=r"^data_factory: set together with data_shards"):
        TrainConfig(data_shards="/data", data_factory="pkg.mod:make")
    with pytest.raises(ValueError, match=r"^data_workers: -1 is below the minimum 0: use a value >= 0"):
        TrainConfig(data_workers=-1)
