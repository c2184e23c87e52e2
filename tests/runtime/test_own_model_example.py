"""examples/own-model end to end: text -> ``hyperframe data prepare`` -> ``hyperframe local``.

The example's own ``nn.Module`` (``examples/own-model/model.py``, returned as a ``TorchModel``)
trains on byte shards of this repository's README through the real launcher, torchrun and two
gloo ranks, with the job's ``entrypoint.module`` and ``spec.data`` as written (fewer frames, no
smoke gate, the shards in a temporary directory).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "own-model"


def test_the_own_model_example_trains_from_a_text_file(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    cli = [sys.executable, "-m", "hyperframe.cli"]
    prepared = subprocess.run(
        [*cli, "data", "prepare", str(REPO / "README.md"), "-o", str(shards)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    docs = list(yaml.safe_load_all((EXAMPLE / "job.yaml").read_text(encoding="utf-8")))
    for doc in docs:
        if doc["kind"] == "HyperFrameJob":
            doc["spec"]["data"]["shards"] = str(shards)
            doc["spec"]["frames"]["frames"] = 3
        else:
            doc["spec"]["smoke"]["enabled"] = False
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE)}
    proc = subprocess.run(
        [*cli, "local", str(job), "--workdir", str(tmp_path / "work")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env=env,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    losses = [float(x) for x in re.findall(r"frame \d+: loss ([0-9.]+)", out)]
    assert len(losses) == 3 and all(0 < x < 10 for x in losses), out[-6000:]
