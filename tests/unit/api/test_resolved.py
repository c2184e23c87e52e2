"""ResolvedJobConfig: the job.json contract between the renderer and every pod."""

from __future__ import annotations

import json

import pytest
from api_helpers import example_pair
from hyperframe.api.errors import SpecError
from hyperframe.api.models import parse_job, parse_runtime
from hyperframe.api.resolve import resolve
from hyperframe.api.resolved import SCHEMA_VERSION, ResolvedJobConfig


def config(example: str) -> ResolvedJobConfig:
    job, rt = example_pair(example)
    return resolve(parse_job(job), parse_runtime(rt)).config


@pytest.mark.parametrize("example", ["cpu-tiny.yaml", "cpu-2node.yaml", "gpu-pipeline.yaml", "gpu-rdma.yaml"])
def test_json_round_trip(example: str) -> None:
    cfg = config(example)
    text = cfg.to_json()
    assert ResolvedJobConfig.from_json(text) == cfg
    assert ResolvedJobConfig.from_json(text.encode()) == cfg
    assert text == cfg.to_json()  # stable


def test_contents_of_the_cpu_demo() -> None:
    data = json.loads(config("cpu-tiny.yaml").to_json())
    assert data["schemaVersion"] == SCHEMA_VERSION
    assert data["job"] == {"name": "cpu-tiny", "namespace": "default"}
    assert (data["nodes"], data["gpusPerNode"], data["procsPerNode"], data["worldSize"]) == (1, 0, 2, 2)
    assert data["backend"] == "gloo"
    assert data["parallelism"] == {"pipeline": 2, "data": 1}
    assert data["frames"]["schedulePolicy"] == "hyperframe" and data["frames"]["stagesPerRank"] == 2
    assert data["entrypoint"] == {
        "builtin": {
            "model": "tiny-gpt",
            "layers": 4,
            "hiddenSize": 64,
            "heads": 4,
            "vocabSize": 256,
            "seqLen": 32,
        }
    }
    assert data["rendezvous"] == {
        "masterAddr": "cpu-tiny-0.cpu-tiny.default.svc",
        "masterPort": 29500,
        "timeoutSeconds": 900,
    }
    assert data["smoke"]["deviceChecks"] == [] and data["smoke"]["ncclMessageSizes"] == [65536, 1048576]
    assert data["images"]["framework"].startswith("ghcr.io/hyperframe-dev/hyperframe-framework")
    assert data["versions"] == {"torch": "2.13.0+cpu", "python": "3.12"}


def test_user_module_entrypoint() -> None:
    ep = config("gpu-rdma.yaml").entrypoint
    assert ep.builtin is None and ep.module is not None
    assert ep.module.name == "my_project.train:build_model"
    assert ep.module.args == {"data": "/data/tokens", "vocab": 50304}


def test_from_json_names_the_bad_field() -> None:
    data = json.loads(config("cpu-tiny.yaml").to_json())
    data["worldSize"] = "two"
    del data["backend"]
    with pytest.raises(SpecError) as info:
        ResolvedJobConfig.from_json(json.dumps(data))
    assert info.value.paths() == ["job.json.worldSize", "job.json.backend"]
