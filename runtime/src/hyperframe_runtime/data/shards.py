"""Token shards: a directory of header-less flat binary token files and a ``meta.json`` beside them.

The format (``FORMAT``, version 1), written by ``hyperframe data prepare`` (``data.prepare``)::

    DIR/meta.json          {"format": "hyperframe-tokens", "version": 1, "dtype": "uint16",
                            "tokenizer": "byte", "vocab_size": 256, "max_token": 255,
                            "shards": [{"file": "shard-000000.bin", "tokens": 1048576}, ...]}
    DIR/shard-000000.bin   the tokens, little-endian ``dtype`` (uint16 or uint32), no header

This is the flat layout of nanoGPT's ``train.bin`` with the dtype in a sidecar instead of a
convention. Files are memory-mapped (``numpy.memmap``), opened lazily in each process that reads
them (DataLoader workers included), so a dataset larger than memory costs only the pages read.

Sample ``i`` of a shard is its tokens ``[i * seq_len, i * seq_len + seq_len + 1)``: inputs are
the first ``seq_len`` of them, targets the last ``seq_len`` (next-token prediction); windows do not
cross shard ends, and a shard's last tokens that do not fill a window are not read.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, get_args

import numpy as np
import torch
from hyperframe.api.codec import parse_lenient
from hyperframe.api.fields import Format, value_rules
from torch.utils.data import Dataset

from hyperframe_runtime.data.errors import DataError

__all__ = [
    "DTYPES",
    "FORMAT",
    "META_FILE",
    "ShardDataset",
    "ShardFile",
    "ShardMeta",
    "check_vocab",
    "read_meta",
]

FORMAT: Final = "hyperframe-tokens"
VERSION: Final = 1
META_FILE: Final = "meta.json"
Dtype = Literal["uint16", "uint32"]
DTYPES: Final[dict[str, int]] = {name: 2 ** (8 * np.dtype(name).itemsize) for name in get_args(Dtype)}
"""Token dtypes a shard may use, with the number of token ids each can hold."""


_FILE_NAME: Final = Format(r"^(?!\.\.?$)[^/]+$", "a plain file name (no directory)", "shard-000000.bin")


@dataclass(frozen=True, slots=True)
class ShardFile:
    file: str = field(metadata=value_rules(fmt=_FILE_NAME))
    """File name inside the shards directory."""
    tokens: int = field(metadata=value_rules(minimum=0))


@dataclass(frozen=True, slots=True, kw_only=True)
class _MetaFields:
    """The fields of ``meta.json`` after its format and version, read by the API codec from the
    rules declared here (keys a newer writer adds are ignored)."""

    dtype: Dtype
    tokenizer: str = ""
    vocab_size: int = field(metadata=value_rules(minimum=1))
    max_token: int = field(metadata=value_rules(minimum=0))
    shards: tuple[ShardFile, ...] = field(metadata=value_rules(min_items=1))


@dataclass(frozen=True, slots=True)
class ShardMeta:
    """What ``meta.json`` says, checked against the files it names."""

    root: Path
    dtype: str
    tokenizer: str
    vocab_size: int
    max_token: int
    shards: tuple[ShardFile, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "dtype": self.dtype,
            "tokenizer": self.tokenizer,
            "vocab_size": self.vocab_size,
            "max_token": self.max_token,
            "shards": [{"file": s.file, "tokens": s.tokens} for s in self.shards],
        }

    def samples_per_shard(self, seq_len: int) -> list[int]:
        """Whole windows of ``seq_len + 1`` tokens, stepping by ``seq_len``, in each shard."""
        return [max(0, (s.tokens - 1) // seq_len) for s in self.shards]


def read_meta(root: str | Path, *, field: str = "data.shards") -> ShardMeta:
    """Read and check the shards directory ``root``; a problem raises :class:`DataError` naming
    ``field``, the path and the fix."""
    base = Path(root)
    fix_prepare = "write the shards there with `hyperframe data prepare TEXT... -o DIR`"
    if not base.is_dir():
        raise DataError(
            f"{field}: {base} is not a directory; {fix_prepare} or mount the volume that holds them"
        )
    meta_path = base / META_FILE
    if not meta_path.is_file():
        raise DataError(
            f"{field}: {base} has no {META_FILE} (empty or not a shards directory); {fix_prepare}"
        )
    try:
        raw = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{field}: {meta_path} cannot be read as JSON ({exc}); {fix_prepare}") from exc
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("version") != VERSION:
        raise DataError(f"{field}: {meta_path} is not a {FORMAT} version {VERSION} file; {fix_prepare}")
    fields, errors = parse_lenient(_MetaFields, raw)
    if errors or fields is None:
        raise DataError("\n".join(f"{field}: {meta_path}: {e} (or {fix_prepare})" for e in errors))
    meta = ShardMeta(
        root=base,
        dtype=fields.dtype,
        tokenizer=fields.tokenizer,
        vocab_size=fields.vocab_size,
        max_token=fields.max_token,
        shards=fields.shards,
    )
    itemsize = np.dtype(meta.dtype).itemsize
    for shard in meta.shards:
        path = base / shard.file
        if not path.is_file():
            raise DataError(f"{field}: {path} is listed in {META_FILE} but missing; {fix_prepare}")
        size = path.stat().st_size
        if size != shard.tokens * itemsize:
            raise DataError(
                f"{field}: {path} has {size} bytes, but {META_FILE} says {shard.tokens} {meta.dtype} "
                f"tokens ({shard.tokens * itemsize} bytes): the dtype or the file is wrong; {fix_prepare}"
            )
    return meta


def check_vocab(
    meta: ShardMeta, vocab_size: int, *, field: str = "data.shards", fix: str = "entrypoint.builtin.vocabSize"
) -> None:
    """Raise unless every token id of the shards is below the model's ``vocab_size``; ``fix``
    names where the model's vocabulary is set."""
    if meta.max_token >= vocab_size:
        raise DataError(
            f"{field}: {meta.root} holds token ids up to {meta.max_token} ({meta.tokenizer or 'unknown'} "
            f"tokenizer, vocabulary {meta.vocab_size}), but the model's vocab_size is {vocab_size}; "
            f"set vocab_size to at least {meta.max_token + 1} ({fix}), or prepare the shards with "
            "the model's tokenizer"
        )


class ShardDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Map-style dataset over the shards' windows; items are ``(inputs, targets)`` int64 tensors
    of ``seq_len`` tokens. ``vocab_size`` > 0 checks each window (a file edited after prepare)."""

    def __init__(self, meta: ShardMeta, seq_len: int, *, vocab_size: int = 0) -> None:
        self.meta, self.seq_len, self.vocab_size = meta, seq_len, vocab_size
        counts = meta.samples_per_shard(seq_len)
        self._starts = [0]
        for count in counts:
            self._starts.append(self._starts[-1] + count)
        self._maps: dict[int, np.memmap[Any, np.dtype[Any]]] = {}

    def __len__(self) -> int:
        return self._starts[-1]

    def __getstate__(self) -> dict[str, Any]:
        # Workers started by spawn/forkserver re-open the files instead of receiving copies.
        state = dict(self.__dict__)
        state["_maps"] = {}
        return state

    def _tokens(self, shard: int) -> np.memmap[Any, np.dtype[Any]]:
        tokens = self._maps.get(shard)
        if tokens is None:
            path = self.meta.root / self.meta.shards[shard].file
            tokens = np.memmap(path, dtype=np.dtype(self.meta.dtype).newbyteorder("<"), mode="r")
            self._maps[shard] = tokens
        return tokens

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= index < len(self):
            raise IndexError(f"sample {index} out of range 0..{len(self) - 1}")
        shard = bisect.bisect_right(self._starts, index) - 1
        offset = (index - self._starts[shard]) * self.seq_len
        window = np.asarray(self._tokens(shard)[offset : offset + self.seq_len + 1], dtype=np.int64)
        if self.vocab_size and int(window.max()) >= self.vocab_size:
            path = self.meta.root / self.meta.shards[shard].file
            raise DataError(
                f"data.shards: {path} holds token {int(window.max())} at tokens {offset}.."
                f"{offset + self.seq_len}, not below vocab_size {self.vocab_size}; the file changed "
                "after prepare: prepare the shards again"
            )
        tokens = torch.from_numpy(window)
        return tokens[:-1], tokens[1:]
