"""The project's KWOK Stages and the annotation names in hyperframe_devcluster.sim agree.

Covers: every Stage parses and is named and weighted as the matching rules need; every
annotation constant is read by some Stage and every annotation a Stage reads is a constant;
the per-node fault Stage derived from pod-init-fail.yaml; the simulated node objects.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hyperframe_devcluster import faults, paths, sim

STAGE_TEXTS = {stage["metadata"]["name"]: stage for stage in sim.project_stages()}


def _all_text() -> str:
    return "\n".join(sim.stage_text(path.name) for path in sim.stage_files())


def test_stages_are_project_named_and_default_weighted() -> None:
    stages = sim.project_stages()

    assert len({s["metadata"]["name"] for s in stages}) == len(stages)
    for stage in stages:
        assert stage["kind"] == "Stage"
        assert stage["metadata"]["name"].startswith("hyperframe-")
        # Weight 0: a fault Stage with weight 1 always wins over these (kwok picks by weight).
        assert stage["spec"]["weight"] == 0
        for expression in stage["spec"]["selector"]["matchExpressions"]:
            assert set(expression) == {"jq"}


def test_every_annotation_constant_is_read_by_a_stage_and_vice_versa() -> None:
    text = _all_text()
    constants = {*sim.POD_ANNOTATIONS, sim.ANNOTATION_NODE_NOT_READY}

    used = set(re.findall(r"sim\.hyperframe\.dev/[a-z-]+", text))

    assert used == constants


def test_default_init_message_matches_the_stage() -> None:
    assert f'"{sim.DEFAULT_INIT_MESSAGE}"' in sim.stage_text("pod-init-complete.yaml")


def _matchers(stage: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["jq"] for e in stage["spec"]["selector"]["matchExpressions"]]


def test_node_fault_stage_selects_the_node_and_fixes_code_and_message() -> None:
    stage = faults.node_fault_stage(
        "hf-gpu-3", exit_code=3, message='rendezvous "timeout" {{ x }}', container="smoke-gate"
    )

    assert stage["metadata"]["name"] == "hyperframe-node-fault-hf-gpu-3"
    assert stage["metadata"]["labels"] == {faults.NODE_FAULT_LABEL: "hf-gpu-3"}
    assert stage["spec"]["weight"] == 1
    matchers = _matchers(stage)
    assert {"key": ".spec.nodeName", "operator": "In", "values": ["hf-gpu-3"]} in matchers
    assert not any(sim.ANNOTATION_INIT_EXIT_CODE in m["key"] for m in matchers)
    template = stage["spec"]["steps"][0]["patch"]["template"]
    assert '{{ $code = "3" }}' in template
    assert '{{ $message = "rendezvous \\"timeout\\" {{ x }}" }}' in template
    assert '{{ $target = "smoke-gate" }}' in template
    assert "hyperframe:overrides" not in template


def test_node_fault_stage_leaves_the_shipped_stage_untouched() -> None:
    before = sim.stage_text("pod-init-fail.yaml")
    faults.node_fault_stage("n", exit_code=1, message="m")
    assert sim.stage_text("pod-init-fail.yaml") == before
    assert STAGE_TEXTS["hyperframe-pod-init-fail"]["spec"]["weight"] == 0


@pytest.mark.parametrize(
    ("code", "message", "field"), [(0, "m", "exit_code"), (256, "m", "exit_code"), (1, "x" * 4097, "message")]
)
def test_node_fault_stage_rejects_what_a_kubelet_could_not_report(
    code: int, message: str, field: str
) -> None:
    with pytest.raises(ValueError, match=f"^{field}:"):
        faults.node_fault_stage("n", exit_code=code, message=message)


def test_gpu_nodes_are_simulated_h200_nodes_with_the_gpu_taint() -> None:
    node = sim.gpu_node(2)

    assert node["metadata"]["name"] == "hf-gpu-2"
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["metadata"]["labels"][sim.GPU_PRODUCT_LABEL] == "NVIDIA-H200"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "hf-gpu-2"
    assert node["status"]["allocatable"][sim.GPU_RESOURCE] == "8"
    assert sim.RDMA_RESOURCE in node["status"]["allocatable"]
    assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert sim.GPU_TOLERATION["key"] == "nvidia.com/gpu"


def test_system_nodes_have_no_gpus_and_no_taint() -> None:
    node = sim.system_node(0)

    assert sim.GPU_RESOURCE not in node["status"]["capacity"]
    assert node["spec"]["taints"] == []


def test_docs_document_every_annotation() -> None:
    docs = (paths.repo_root() / "docs" / "local-cluster.md").read_text()

    for annotation in (*sim.POD_ANNOTATIONS, sim.ANNOTATION_NODE_NOT_READY):
        assert f"`{annotation}" in docs, annotation


def test_a_passing_node_outcome_is_derived_from_the_init_complete_stage() -> None:
    stage = faults.init_outcome_stage("hf-gpu-0", exit_code=0, message='{"result": "pass"}')

    assert stage["spec"]["weight"] == 1
    assert {"key": ".spec.nodeName", "operator": "In", "values": ["hf-gpu-0"]} in _matchers(stage)
    template = stage["spec"]["steps"][0]["patch"]["template"]
    assert '{{ $message = "{\\"result\\": \\"pass\\"}" }}' in template
    assert "phase: Running" in template
    assert "$code =" not in template
