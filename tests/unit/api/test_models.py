"""Whole-object parsing: apiVersion/kind/metadata checks and the runtime's own rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hyperframe.api.errors import SpecError
from hyperframe.api.job import MAX_JOB_NAME_LENGTH
from hyperframe.api.models import parse_job, parse_runtime
from test_defaults import MINIMAL_JOB, MINIMAL_RUNTIME


def paths(fn: Any, obj: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        fn(obj)
    return info.value.paths()


def test_wrong_kind_and_api_version_are_named() -> None:
    obj = {**MINIMAL_JOB, "apiVersion": "v1", "kind": "Pod"}
    assert paths(parse_job, obj) == ["apiVersion", "kind"]


def test_metadata_name_rules() -> None:
    assert paths(parse_job, {**MINIMAL_JOB, "metadata": {}}) == ["metadata.name"]
    assert paths(parse_job, {**MINIMAL_JOB, "metadata": {"name": "Upper"}}) == ["metadata.name"]
    too_long = "a" * (MAX_JOB_NAME_LENGTH + 1)
    with pytest.raises(SpecError, match=f"at most {MAX_JOB_NAME_LENGTH} characters"):
        parse_job({**MINIMAL_JOB, "metadata": {"name": too_long}})
    assert parse_job({**MINIMAL_JOB, "metadata": {"name": "a" * MAX_JOB_NAME_LENGTH}})
    # Runtimes are cluster-scoped objects without a Service, so DNS subdomains are fine.
    assert parse_runtime({**MINIMAL_RUNTIME, "metadata": {"name": "gpu.h100-v2"}})


def test_metadata_and_spec_errors_are_reported_together() -> None:
    obj = copy.deepcopy(MINIMAL_JOB)
    obj["metadata"]["name"] = "Bad_Name"
    obj["spec"]["nodes"] = 0
    # As on the API server, a value out of its bounds does not stop the CEL rules: nodes 0 also
    # breaks the parallelism product rule.
    assert set(paths(parse_job, obj)) == {"metadata.name", "spec.nodes", "spec.parallelism"}


def test_missing_spec() -> None:
    assert paths(parse_job, {k: v for k, v in MINIMAL_JOB.items() if k != "spec"}) == ["spec"]


def test_not_a_mapping() -> None:
    assert paths(parse_job, ["nope"]) == ["(document)"]
    assert paths(parse_runtime, None) == ["(document)"]


def test_metadata_fields_are_read() -> None:
    obj = copy.deepcopy(MINIMAL_JOB)
    obj["metadata"].update(namespace="ml", uid="u-1", generation=3, labels={"a": "b"}, annotations={"c": "d"})
    meta = parse_job(obj).metadata
    assert (meta.namespace, meta.uid, meta.generation) == ("ml", "u-1", 3)
    assert meta.labels == {"a": "b"} and meta.annotations == {"c": "d"}


def test_cpu_runtime_cannot_enable_rdma() -> None:
    obj = copy.deepcopy(MINIMAL_RUNTIME)
    obj["spec"]["accelerator"] = "cpu"
    obj["spec"]["pod"] = {"rdma": {"enabled": True}}
    with pytest.raises(SpecError) as info:
        parse_runtime(obj)
    assert info.value.paths() == ["spec.pod.rdma.enabled"]


def test_unknown_override_name_is_rejected() -> None:
    obj = copy.deepcopy(MINIMAL_RUNTIME)
    obj["spec"]["allowedOverrides"] = ["shmSize", "hostPID"]
    assert paths(parse_runtime, obj) == ["spec.allowedOverrides[1]"]


def test_reserved_env_in_runtime_golden_table_is_rejected() -> None:
    obj = copy.deepcopy(MINIMAL_RUNTIME)
    obj["spec"]["pod"] = {
        "env": [{"name": "NCCL_IB_HCA", "value": "mlx5"}, {"name": "WORLD_SIZE", "value": "3"}]
    }
    with pytest.raises(SpecError, match="WORLD_SIZE is reserved"):
        parse_runtime(obj)


@pytest.mark.parametrize(
    "image",
    [
        "repo@sha256:" + "a" * 64,
        "registry.example.com:5000/team/img:1.2@sha256:" + "f" * 64,
        "docker.io/library/python:3.12-slim@sha256:" + "0" * 64,
    ],
)
def test_digest_pinned_images_are_accepted(image: str) -> None:
    obj = copy.deepcopy(MINIMAL_RUNTIME)
    obj["spec"]["images"]["framework"] = image
    assert parse_runtime(obj).spec.images.framework == image


@pytest.mark.parametrize(
    "image", ["repo:latest", "repo@sha256:abc", "Repo@sha256:" + "a" * 64, "repo@sha256:" + "A" * 64]
)
def test_unpinned_or_malformed_images_are_rejected(image: str) -> None:
    obj = copy.deepcopy(MINIMAL_RUNTIME)
    obj["spec"]["images"]["base"] = image
    assert paths(parse_runtime, obj) == ["spec.images.base"]


def test_scheduler_plugins_pod_group_needs_its_scheduler() -> None:
    obj = copy.deepcopy(MINIMAL_RUNTIME)
    obj["spec"]["gang"] = {"podGroup": "SchedulerPlugins"}
    assert paths(parse_runtime, obj) == ["spec.pod.schedulerName"]
    obj["spec"]["pod"] = {"schedulerName": "scheduler-plugins-scheduler"}
    assert parse_runtime(obj).spec.gang.pod_group == "SchedulerPlugins"
