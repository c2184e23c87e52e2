"""spec.data of a HyperFrameJob reaches the trainer: render -> job.json -> launcher -> TrainConfig."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hyperframe.api.resolved import ResolvedJobConfig
from hyperframe.render import render_job
from hyperframe_runtime import launcher
from hyperframe_runtime.local_plan import plan

REPO = Path(__file__).resolve().parents[3]


def _train_config(data: dict[str, Any] | None) -> Any:
    docs = list(yaml.safe_load_all((REPO / "examples" / "cpu-2node.yaml").read_text()))
    job = copy.deepcopy(next(d for d in docs if d["kind"] == "HyperFrameJob"))
    runtime = next(d for d in docs if d["kind"] == "HyperFrameRuntime")
    if data is not None:
        job["spec"]["data"] = data
    return launcher.train_config(ResolvedJobConfig.from_json(plan(render_job(job, runtime)).job_json))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (None, ("", "", 0, 2)),
        ({"shards": "/data/shards"}, ("/data/shards", "", 2, 2)),
        (
            {"factory": "my_project.data:dataset", "numWorkers": 4, "prefetchFactor": 3},
            ("", "my_project.data:dataset", 4, 3),
        ),
    ],
)
def test_spec_data_maps_onto_the_trainer_config(
    data: dict[str, Any] | None, expected: tuple[Any, ...]
) -> None:
    config = _train_config(data)
    assert (config.data_shards, config.data_factory, config.data_workers, config.data_prefetch) == expected
