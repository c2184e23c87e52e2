"""The examples: valid, consistent with each other and with the pin matrix's default runtimes."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from api_helpers import ROOT, example_docs, example_files
from hyperframe.api.models import parse_job, parse_runtime

GENERATED_RUNTIMES = ROOT / "images" / "generated" / "runtimes.yaml"
PROFILE_LABEL = "hyperframe.dev/pin-matrix-profile"


def _runtimes() -> list[tuple[str, dict[str, Any]]]:
    return [(f, d) for f in example_files() for d in example_docs(f) if d["kind"] == "HyperFrameRuntime"]


def test_the_required_examples_exist() -> None:
    assert {"cpu-tiny.yaml", "cpu-2node.yaml", "gpu-pipeline.yaml", "gpu-rdma.yaml"} <= set(example_files())


@pytest.mark.parametrize("example", example_files())
def test_each_example_is_a_job_with_its_runtime(example: str) -> None:
    docs = example_docs(example)
    assert sorted(d["kind"] for d in docs) == ["HyperFrameJob", "HyperFrameRuntime"]
    job = parse_job(next(d for d in docs if d["kind"] == "HyperFrameJob"))
    runtime = parse_runtime(next(d for d in docs if d["kind"] == "HyperFrameRuntime"))
    assert job.spec.runtime_ref.name == runtime.metadata.name
    assert job.metadata.namespace is None, "examples apply into any namespace (kubectl apply -n NS)"


def test_shapes_the_issue_asks_for() -> None:
    def spec(example: str) -> Any:
        return parse_job(next(d for d in example_docs(example) if d["kind"] == "HyperFrameJob")).spec

    tiny = spec("cpu-tiny.yaml")
    assert (tiny.nodes, tiny.gpus_per_node, tiny.procs_per_node, tiny.parallelism.pipeline) == (1, 0, 2, 2)
    # The local demo runs this file: short, yet long enough for the default policy to measure the
    # layer split (4 frames) and the candidate schedules (about 8) and run the winner.
    assert 12 < tiny.frames.frames <= 20, "the local demo runs this file: keep it 13 to 20 frames"
    two = spec("cpu-2node.yaml")
    assert (two.nodes, two.procs_per_node, two.parallelism.pipeline, two.parallelism.data) == (2, 2, 2, 2)
    gpu = spec("gpu-pipeline.yaml")
    assert (gpu.nodes, gpu.gpus_per_node) == (2, 8) and gpu.parallelism.pipeline > 1
    rdma = parse_runtime(next(d for d in example_docs("gpu-rdma.yaml") if d["kind"] == "HyperFrameRuntime"))
    assert rdma.spec.pod.rdma.enabled


def test_runtimes_with_one_name_are_identical_and_never_shadow_the_chart_defaults() -> None:
    by_name: dict[str, dict[str, Any]] = {}
    for _file, runtime in _runtimes():
        name = runtime["metadata"]["name"]
        assert name.startswith("example-"), "applying an example must not replace a default runtime"
        assert by_name.setdefault(name, runtime) == runtime, f"two different runtimes named {name}"


@pytest.mark.parametrize(("example", "runtime"), _runtimes(), ids=[f for f, _ in _runtimes()])
def test_images_and_versions_come_from_the_pin_matrix(example: str, runtime: dict[str, Any]) -> None:
    generated = {d["metadata"]["name"]: d for d in yaml.safe_load_all(GENERATED_RUNTIMES.read_text()) if d}
    profile = runtime["metadata"]["labels"][PROFILE_LABEL]
    expected = generated[profile]["spec"]
    assert runtime["spec"]["accelerator"] == expected["accelerator"]
    for key in ("base", "framework"):
        assert runtime["spec"]["images"][key] == expected["images"][key], f"{example}: images.{key} is stale"
    assert runtime["spec"]["versions"] == expected["versions"], f"{example}: versions are stale"
