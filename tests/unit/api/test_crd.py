"""The CRDs in crds/ are generated from the models and must not drift; their shape is right."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from api_helpers import ROOT
from hyperframe.api.crd import CRD_FILES, job_crd, render_crd_files, runtime_crd
from hyperframe.api.fields import field_meta, json_name, rules_of
from hyperframe.api.introspect import model_fields
from hyperframe.api.job import JobSpec
from hyperframe.api.runtime import RuntimeSpec
from hyperframe.api.status import JobStatus

CRDS = ROOT / "crds"


@pytest.mark.parametrize("name", sorted(CRD_FILES))
def test_generated_files_are_up_to_date(name: str) -> None:
    expected = render_crd_files()[name]
    actual = (CRDS / name).read_text(encoding="utf-8")
    assert actual == expected, f"crds/{name} is stale: run `make generate`"


def test_no_stray_files_in_crds() -> None:
    assert sorted(p.name for p in CRDS.glob("*.yaml")) == sorted(CRD_FILES)


def _walk(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = [(path, schema)]
    for key, sub in schema.get("properties", {}).items():
        out.extend(_walk(sub, f"{path}.{key}"))
    if isinstance(schema.get("items"), dict):
        out.extend(_walk(schema["items"], f"{path}[]"))
    if isinstance(schema.get("additionalProperties"), dict):
        out.extend(_walk(schema["additionalProperties"], f"{path}{{}}"))
    return out


@pytest.mark.parametrize("crd", [job_crd(), runtime_crd()], ids=["job", "runtime"])
def test_schema_is_structural(crd: dict[str, Any]) -> None:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema):
        assert "type" in node or node.get("x-kubernetes-int-or-string"), f"{path} has no type"
        if node.get("type") == "object" and not node.get("x-kubernetes-preserve-unknown-fields"):
            assert "properties" in node or "additionalProperties" in node or path == ".metadata", path
        if path.startswith(".spec") and path.count(".") > 1 and not path.endswith(("[]", "}")):
            assert node.get("description"), f"{path} has no description"


def test_preserve_unknown_fields_only_where_justified() -> None:
    schema = job_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    free = sorted(p for p, node in _walk(schema) if node.get("x-kubernetes-preserve-unknown-fields"))
    assert free == [
        ".spec.entrypoint.module.args",  # the user factory's own arguments (config.model_args)
        ".spec.env[].valueFrom",
        ".spec.runtimeOverrides.env[].valueFrom",
        ".spec.volumes[]",
    ]
    rt = runtime_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert sorted(p for p, node in _walk(rt) if node.get("x-kubernetes-preserve-unknown-fields")) == [
        ".spec.pod.env[].valueFrom"
    ]


def test_names_scope_subresource_and_columns() -> None:
    job, rt = job_crd(), runtime_crd()
    assert job["metadata"]["name"] == "hyperframejobs.hyperframe.dev"
    assert job["spec"]["scope"] == "Namespaced" and rt["spec"]["scope"] == "Cluster"
    assert job["spec"]["names"]["shortNames"] == ["hfj"] and rt["spec"]["names"]["shortNames"] == ["hfr"]
    for crd in (job, rt):
        version = crd["spec"]["versions"][0]
        assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
        assert version["subresources"] == {"status": {}}
    columns = [c["name"] for c in job["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert columns == ["Phase", "Nodes", "GPUs", "Frame", "Frames", "Restarts", "Age"]


def test_every_rule_is_in_the_schema_and_immutables_have_transition_rules() -> None:
    schema = job_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    cels = {r["rule"] for r in spec["x-kubernetes-validations"]}
    assert {r.cel for r in rules_of(JobSpec)} == cels
    for f, _shape in model_fields(JobSpec):
        prop = spec["properties"][json_name(f)]
        rules = [r["rule"] for r in prop.get("x-kubernetes-validations", [])]
        assert ("self == oldSelf" in rules) == field_meta(f).immutable, json_name(f)
    immutable = {json_name(f) for f, _ in model_fields(JobSpec) if field_meta(f).immutable}
    assert immutable == {"runtimeRef", "nodes", "gpusPerNode", "procsPerNode", "parallelism"}


def test_rule_messages_end_with_the_fix() -> None:
    spec = job_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    by_rule = {r.cel: r for r in rules_of(JobSpec)}
    for entry in spec["x-kubernetes-validations"]:
        rule = by_rule[entry["rule"]]
        assert entry["message"].endswith(": " + rule.fix)
        if rule.message_format:
            assert entry["messageExpression"].startswith(f'"{rule.message_format}: {rule.fix}".format([')
            assert entry["messageExpression"].count("%") == rule.message_format.count("%")
            assert len(rule.message_args) == rule.message_format.count("%")


def test_defaults_match_the_models() -> None:
    spec = job_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    frames = spec["properties"]["frames"]["properties"]
    assert frames["schedulePolicy"]["default"] == "hyperframe"
    assert frames["schedulePolicy"]["enum"] == ["hyperframe", "gpipe", "1f1b", "interleaved1f1b", "zbv"]
    assert spec["properties"]["runPolicy"]["default"] == {}
    assert spec["properties"]["runPolicy"]["properties"]["cleanPodPolicy"]["default"] == "Running"
    rt = runtime_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert rt["properties"]["pod"]["properties"]["shmSize"]["default"] == "16Gi"
    assert rt["properties"]["smoke"]["properties"]["ncclMessageSizes"]["default"] == ["1Mi", "64Mi"]


def test_status_schema_covers_the_lifecycle_fields() -> None:
    status = job_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"][
        "properties"
    ]
    assert set(status) == {json_name(f) for f, _ in model_fields(JobStatus)}
    for key in (
        "phase",
        "conditions",
        "restarts",
        "gangGeneration",
        "excludedNodes",
        "smokeTest",
        "progress",
        "observedGeneration",
        "startTime",
        "completionTime",
        "message",
    ):
        assert key in status
    assert set(status["progress"]["properties"]) >= {
        "frame",
        "totalFrames",
        "step",
        "loss",
        "samplesPerSecond",
        "etaSeconds",
        "updatedAt",
    }
    cond = status["conditions"]["items"]["properties"]
    assert set(cond) == {"type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"}


def test_generator_cli_writes_the_files(tmp_path: Path) -> None:
    from hyperframe.api.crd import main

    assert main([str(tmp_path)]) == 0
    for name, text in render_crd_files().items():
        assert (tmp_path / name).read_text(encoding="utf-8") == text
        assert yaml.safe_load(text)["kind"] == "CustomResourceDefinition"


def test_runtime_spec_has_no_rules_beyond_declared() -> None:
    rt = runtime_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert [r["rule"] for r in rt["x-kubernetes-validations"]] == [r.cel for r in rules_of(RuntimeSpec)]
