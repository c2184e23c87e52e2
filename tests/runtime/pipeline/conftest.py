"""Fixtures shared by the pipeline tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch.distributed as dist


@pytest.fixture
def one_rank_group(tmp_path: Path) -> Iterator[None]:
    """A one-rank gloo process group for the test (the frame loop and the executor need one)."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()
