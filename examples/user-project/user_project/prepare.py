"""The data-prepare step: a fixed regression data set in one file, ``DIR/train.pt``.

    python -m user_project.prepare --out DIR [--samples N]

The targets are a fixed linear map of the inputs plus a little noise, so a short run shows the
loss falling; the same seed always writes the same tensors.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

FEATURES = 16
DATA_FILE = "train.pt"


def prepare(out: Path, samples: int, seed: int = 0) -> Path:
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(FEATURES, 1, generator=generator)
    inputs = torch.randn(samples, FEATURES, generator=generator)
    targets = inputs @ weight + 0.01 * torch.randn(samples, 1, generator=generator)
    out.mkdir(parents=True, exist_ok=True)
    path = out / DATA_FILE
    tmp = out / f".{DATA_FILE}.tmp"
    torch.save({"inputs": inputs, "targets": targets}, tmp)
    os.replace(tmp, path)  # a reader sees no file or the whole file
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m user_project.prepare", description=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="directory to write train.pt into")
    parser.add_argument("--samples", type=int, default=4096)
    args = parser.parse_args(argv)
    path = prepare(args.out, args.samples)
    print(f"wrote {args.samples} samples to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
