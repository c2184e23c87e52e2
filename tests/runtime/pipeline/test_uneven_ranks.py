"""Unequal rank speeds on real gloo ranks: the runtime measures, partitions and runs an uneven split.

Runs ``bench.uneven_ranks`` (two CPU ranks, rank 1 sleeping in proportion to the blocks it holds)
with few frames. Checked here: the measured costs show rank 1 slow, the partitioner moves blocks
off it, the built-in GPT runs the uneven split through its per-layer hook, and it is the same
model (the first frame's loss, before any optimizer step, is equal on both splits). The step-time
comparison is a measurement, not an assertion: ``python -m bench.uneven_ranks`` (docs/runtime.md).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]


def test_the_partitioned_split_moves_blocks_off_the_slow_rank(tmp_path: Path) -> None:
    out = tmp_path / "uneven.json"
    subprocess.run(
        [sys.executable, "-m", "bench.uneven_ranks", "--frames", "4", "--json", str(out)],
        cwd=ROOT,
        env=os.environ.copy(),
        check=True,
        timeout=600,
    )
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["even_split"] == [0, 4, 8]
    assert result["rank_slowdown"][0] == 1.0 and result["rank_slowdown"][1] > 2.0
    split = result["split"]
    assert split[0] == 0 and split[-1] == 8 and split[1] - split[0] > 4  # rank 0 takes more blocks
    assert result["split_loss"][0] == pytest.approx(result["even_loss"][0], rel=1e-5)
    assert all(math.isfinite(x) for x in result["split_loss"] + result["even_loss"])
    assert len(result["split_frame_s"]) == len(result["even_frame_s"]) == 4
