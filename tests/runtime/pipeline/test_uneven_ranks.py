"""Unequal rank speeds on real gloo ranks: the runtime measures, partitions and runs an uneven split.

Runs ``bench.uneven_ranks`` (two CPU ranks, rank 1 sleeping in proportion to the blocks it holds)
with 8 frames: with ``layer_split = "measured"`` the frame loop times every op of the first 4 on
the even split, then re-splits the layers and continues. Checked here: the measured costs show
rank 1 slow, the partitioner moves blocks off it, the built-in GPT runs the uneven split through
its per-layer hook, the re-split is logged, and training continues exactly (the losses equal an
even-split run's). The step-time comparison is
a measurement, not an assertion (no timing asserts in tests): ``python -m bench.uneven_ranks``,
numbers in docs/runtime.md.
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


def test_the_runtime_measures_partitions_and_continues_on_an_uneven_split(tmp_path: Path) -> None:
    out = tmp_path / "uneven.json"
    subprocess.run(
        [sys.executable, "-m", "bench.uneven_ranks", "--frames", "8", "--json", str(out)],
        cwd=ROOT,
        env=os.environ.copy(),
        check=True,
        timeout=600,
    )
    result = json.loads(out.read_text(encoding="utf-8"))
    k = result["calibration_frames"]
    assert k == 4
    assert result["rank_slowdown"][0] == 1.0 and result["rank_slowdown"][1] > 2.0
    split = result["split"]
    assert split[0] == 0 and split[-1] == 8 and split[1] - split[0] > 4  # rank 0 takes more blocks
    assert any(e.startswith(f"frame {k}: layer split [0, 4, 8] -> {split}") for e in result["events"])
    # Calibration frames run the even split: the same training as the baseline...
    assert result["partitioned_loss"][:k] == pytest.approx(result["even_loss"][:k], rel=1e-6)
    # ...and the first frame on the new split continues exactly (weights and AdamW state by name).
    assert result["partitioned_loss"][k] == pytest.approx(result["even_loss"][k], rel=1e-5)
    losses = result["partitioned_loss"]
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]
