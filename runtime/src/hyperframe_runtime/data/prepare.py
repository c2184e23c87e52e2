"""``hyperframe data prepare TEXT... -o DIR``: token shards (``data.shards``) from text files.

Byte-level: every byte of every file, in the order given, is one token (a vocabulary of 256, as
``uint16``), so any text trains the built-in GPT at ``vocab_size`` 256 without a tokenizer, and
decoding is ``bytes(tokens)``. Files are read in chunks and shards are written as they fill, so
the input may be larger than memory. ``meta.json`` is written last: a prepare that stopped
half-way leaves a directory that training refuses (no ``meta.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, Final

import numpy as np

from hyperframe_runtime.data.shards import META_FILE, ShardFile, ShardMeta

__all__ = ["BYTE_VOCAB", "main", "prepare_bytes"]

BYTE_VOCAB: Final = 256
DEFAULT_SHARD_TOKENS: Final = 1 << 24
"""Tokens per shard file (16 Mi tokens, 32 MiB as uint16) unless ``--shard-tokens`` says otherwise."""
_CHUNK: Final = 1 << 22


def _byte_chunks(paths: Iterable[Path]) -> Iterator[np.ndarray]:
    for path in paths:
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                yield np.frombuffer(chunk, dtype=np.uint8).astype("<u2")


class _ShardWriter:
    def __init__(self, root: Path, shard_tokens: int) -> None:
        self.root, self.shard_tokens = root, shard_tokens
        self.shards: list[ShardFile] = []
        self.max_token = -1
        self._handle: BinaryIO | None = None
        self._in_shard = 0

    def write(self, tokens: np.ndarray) -> None:
        if tokens.size:
            self.max_token = max(self.max_token, int(tokens.max()))
        while tokens.size:
            if self._handle is None:
                name = f"shard-{len(self.shards):06d}.bin"
                self._handle = (self.root / name).open("wb")
                self.shards.append(ShardFile(file=name, tokens=0))
                self._in_shard = 0
            room = self.shard_tokens - self._in_shard
            part, tokens = tokens[:room], tokens[room:]
            self._handle.write(part.tobytes())
            self._in_shard += part.size
            self.shards[-1] = ShardFile(file=self.shards[-1].file, tokens=self._in_shard)
            if self._in_shard == self.shard_tokens:
                self._close_shard()

    def _close_shard(self) -> None:
        if self._handle is not None:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            self._handle = None

    def finish(self) -> None:
        self._close_shard()


def prepare_bytes(
    texts: Sequence[str | Path], out: str | Path, *, shard_tokens: int = DEFAULT_SHARD_TOKENS
) -> ShardMeta:
    """Write the byte-level shards of ``texts`` into ``out`` (created; must hold no shards yet)."""
    paths = [Path(t) for t in texts]
    for path in paths:
        if not path.is_file():
            raise ValueError(f"TEXT: {path} is not a readable file; name existing text files")
    if shard_tokens < 2:
        raise ValueError(f"--shard-tokens: {shard_tokens} must be >= 2")
    root = Path(out)
    if (root / META_FILE).exists():
        raise ValueError(
            f"-o: {root} already holds shards ({META_FILE}); remove it or choose another directory"
        )
    root.mkdir(parents=True, exist_ok=True)
    writer = _ShardWriter(root, shard_tokens)
    for chunk in _byte_chunks(paths):
        writer.write(chunk)
    writer.finish()
    if not writer.shards:
        raise ValueError(f"TEXT: {', '.join(map(str, paths))} hold no bytes; give non-empty text files")
    meta = ShardMeta(
        root=root,
        dtype="uint16",
        tokenizer="byte",
        vocab_size=BYTE_VOCAB,
        max_token=writer.max_token,
        shards=tuple(writer.shards),
    )
    tmp = root / (META_FILE + ".tmp")
    tmp.write_text(json.dumps(meta.to_json(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, root / META_FILE)
    return meta


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hyperframe data", description="Prepare training data.")
    sub = parser.add_subparsers(dest="command", required=True)
    prepare = sub.add_parser(
        "prepare",
        help="write byte-level token shards from text files",
        description="Write byte-level token shards (uint16, vocabulary 256) of TEXT files into DIR, "
        "for spec.data.shards / data_shards.",
    )
    prepare.add_argument("texts", nargs="+", metavar="TEXT", help="text files, read as bytes in this order")
    prepare.add_argument("-o", "--out", required=True, metavar="DIR", help="shards directory to create")
    prepare.add_argument(
        "--shard-tokens",
        type=int,
        default=DEFAULT_SHARD_TOKENS,
        help=f"tokens per shard file (default {DEFAULT_SHARD_TOKENS})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        meta = prepare_bytes(args.texts, args.out, shard_tokens=args.shard_tokens)
    except (OSError, ValueError) as exc:
        print(f"hyperframe data prepare: {exc}", file=sys.stderr)
        return 2
    tokens = sum(s.tokens for s in meta.shards)
    print(
        f"{meta.root}: {tokens} tokens in {len(meta.shards)} shard(s), byte-level (vocab_size {BYTE_VOCAB})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
