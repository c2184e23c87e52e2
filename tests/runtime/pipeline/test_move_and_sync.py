"""A stage move sends only what changes rank, in bounded buckets; the DP sync reduces in bounded
buckets (two real gloo ranks, ``move_sync_harness.py``), and the bucketing itself (pure)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hyperframe_runtime.pipeline.grad_sync import buckets_of

HARNESS = Path(__file__).with_name("move_sync_harness.py")
BUCKET = 4096


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("move-sync")
    proc = subprocess.run(
        [sys.executable, str(HARNESS), str(out)], capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-6000:]
    return out


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


@pytest.mark.slow
def test_a_move_sends_only_the_leaving_layers_and_keeps_every_value(results: Path) -> None:
    (before0, after0, stats0), (before1, after1, stats1) = torch.load(results / "move.pt", weights_only=False)
    # Every value (parameter, step, both AdamW moments) lands where it is held next, unchanged.
    held_before = {**before0, **before1}
    for name, values in {**after0, **after1}.items():
        for got, want in zip(values, held_before[name], strict=True):
            assert torch.equal(got, want), name
    # Only layers 4 and 5 travel, from rank 0 to rank 1: their parameters and moments (the step
    # is a number in the table), nothing else, and nothing towards rank 0.
    moving = [
        t for name, values in before0.items() if name.startswith(("layer4.", "layer5.")) for t in values[::2]
    ]
    moving += [before0[name][3] for name in before0 if name.startswith(("layer4.", "layer5."))]
    assert stats0["sent_bytes"] == stats1["received_bytes"] == _nbytes(moving)
    assert stats1["sent_bytes"] == 0 and stats0["received_bytes"] == 0
    # The transient memory: at most one bucket packed at a time; the wide weight goes on its own.
    assert 0 < stats0["largest_staging_bytes"] <= BUCKET and 0 < stats1["largest_staging_bytes"] <= BUCKET
    assert stats0["buckets"] == stats1["buckets"] >= 3


@pytest.mark.slow
def test_the_bucketed_sync_gives_the_mean_and_bounds_its_buffers(results: Path) -> None:
    got = torch.load(results / "sync.pt", weights_only=False)
    sizes = [40 * 40, 40, 64, 8, 64, 8, 64, 8]
    for i, (grad, numel) in enumerate(zip(got["grads"], sizes, strict=True)):
        pattern = torch.arange(numel, dtype=torch.float32).reshape(grad.shape) / (i + 1)
        assert torch.allclose(grad, 1.5 * pattern)  # (1x + 2x) x 1 / (micro-batches x replicas)
    assert 0 < got["peak"] <= 2 * BUCKET
    assert [stage for stage, _, _ in got["spans"]] == [0]


def test_gradients_are_bucketed_in_order_with_big_ones_alone() -> None:
    assert buckets_of([100, 5000, 300, 3000, 900, 50], 4096) == [[1], [0, 2, 3], [4, 5]]
    assert buckets_of([], 4096) == []
