"""spec.image: a job's own image, only where the runtime allows it and only under its prefixes.

The job image replaces the framework image in both containers (the gate runs from it too), and
job.json tells the pod which hyperframe-runtime version the operator expects inside it.
"""

from __future__ import annotations

from typing import Any

import pytest
from api_helpers import example_pair, patched
from hyperframe.api.errors import SpecError
from hyperframe.api.models import parse_runtime
from hyperframe.api.resolve import image_matches
from hyperframe.api.resolved import ResolvedJobConfig
from hyperframe.render import render_job
from hyperframe.version import distribution_version

DIGEST = "@sha256:" + "0" * 64
USER = "user-project/job.yaml"
Doc = dict[str, Any]


def _pods_and_config(job: Doc, runtime: Doc) -> tuple[list[Doc], ResolvedJobConfig]:
    objects = render_job(job, runtime)
    config_map = next(o for o in objects if o["kind"] == "ConfigMap")
    return [o for o in objects if o["kind"] == "Pod"], ResolvedJobConfig.from_json(
        config_map["data"]["job.json"]
    )


def _errors(job: Doc, runtime: Doc) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        render_job(job, runtime)
    return {e.path: str(e) for e in info.value.errors}


def test_the_job_image_runs_the_gate_and_the_trainer() -> None:
    job, runtime = example_pair(USER)
    pods, config = _pods_and_config(job, runtime)
    image = job["spec"]["image"]
    for pod in pods:
        assert [c["image"] for c in pod["spec"]["initContainers"] + pod["spec"]["containers"]] == [
            image,
            image,
        ]
    assert config.image == image
    assert config.images.framework == runtime["spec"]["images"]["framework"]


def test_without_a_job_image_both_containers_run_the_framework_image() -> None:
    job, runtime = example_pair(USER)
    del job["spec"]["image"]
    pods, config = _pods_and_config(job, runtime)
    framework = runtime["spec"]["images"]["framework"]
    assert {c["image"] for p in pods for c in p["spec"]["initContainers"] + p["spec"]["containers"]} == {
        framework
    }
    assert config.image == framework


def test_job_json_names_the_runtime_version_the_operator_expects() -> None:
    _, config = _pods_and_config(*example_pair(USER))
    assert config.runtime_version == distribution_version("hyperframe") != ""


def test_a_runtime_that_does_not_allow_images_refuses_one_naming_the_field_and_the_fix() -> None:
    job, runtime = example_pair(USER)
    runtime = patched(runtime, {"spec": {"allowedOverrides": ["shmSize"]}})
    errs = _errors(job, runtime)
    assert list(errs) == ["spec.image"]
    assert (
        'HyperFrameRuntime "example-cpu-user-images" does not allow jobs their own image'
        in errs["spec.image"]
    )
    assert 'add "image" to spec.allowedOverrides of "example-cpu-user-images"' in errs["spec.image"]


@pytest.mark.parametrize(
    "image",
    [
        "registry.example.com/ml-other/user-project",  # a sibling repository sharing the text prefix
        "registry.example.com/user-project",
        "evil.example.com/ml/user-project",
    ],
)
def test_an_image_outside_the_allowed_prefixes_is_refused(image: str) -> None:
    job, runtime = example_pair(USER)
    job = patched(job, {"spec": {"image": image + DIGEST}})
    errs = _errors(job, runtime)
    assert list(errs) == ["spec.image"]
    assert f"{image} is not under an allowed prefix" in errs["spec.image"]
    assert "(registry.example.com/ml/)" in errs["spec.image"]


def test_prefix_matching_stops_at_name_boundaries() -> None:
    image = "registry.example.com/ml/user-project" + DIGEST
    assert image_matches(image, "registry.example.com/ml/")
    assert image_matches(image, "registry.example.com/ml")
    assert image_matches(image, "registry.example.com/ml/user-project")
    assert not image_matches(image, "registry.example.com/m")
    assert not image_matches(image, "registry.example.com/ml/user")
    assert not image_matches(image, "")


def test_allowing_images_without_prefixes_is_refused_in_the_runtime() -> None:
    _, runtime = example_pair(USER)
    runtime = patched(runtime, {"spec": {"images": {"allowedPrefixes": []}}})
    with pytest.raises(SpecError) as info:
        parse_runtime(runtime)
    assert info.value.paths() == ["spec.images.allowedPrefixes"]
    assert "e.g. registry.example.com/ml/" in str(info.value)
