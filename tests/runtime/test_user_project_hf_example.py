"""examples/user-project/job-hf.yaml end to end: the user's Hugging Face module under ``hyperframe local``.

The project's own factory (``user_project.hf_model:build``, a tiny Llama handed to
``hyperframe_runtime.models.hf:causal_lm``) trains on byte shards of this repository's README
through the real launcher, torchrun and two gloo pipeline ranks, with the job's
``entrypoint.module`` (its ``seqLen`` included) and ``spec.data`` as written: fewer frames, no
smoke gate, the shards in a temporary directory instead of the volume and no snapshots (they go
to the volume's mount path, /data).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1].parent
PROJECT = REPO / "examples" / "user-project"
FRAMES = 3


def test_the_user_projects_hf_module_trains_on_two_pipeline_ranks(tmp_path: Path) -> None:
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
    docs = list(yaml.safe_load_all((PROJECT / "job-hf.yaml").read_text(encoding="utf-8")))
    for doc in docs:
        if doc["kind"] == "HyperFrameJob":
            doc["spec"]["data"]["shards"] = str(shards)
            doc["spec"]["frames"]["frames"] = FRAMES
            del doc["spec"]["frames"]["checkpoint"]
        else:
            doc["spec"]["smoke"]["enabled"] = False
    job = tmp_path / "job-hf.yaml"
    job.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    work = tmp_path / "work"
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    proc = subprocess.run(
        [*cli, "local", str(job), "--workdir", str(work)],
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
    # A fresh model over 256 byte ids starts near ln(256) and trains from there.
    assert len(losses) == FRAMES and all(0 < x < 2 * math.log(256) for x in losses), out[-6000:]
    (config,) = [json.loads(p.read_text()) for p in work.glob("**/train*.json")] or [{}]
    assert config.get("seq_len") == 64 and config.get("model") == "user_project.hf_model:build", out[-3000:]
