"""`helm lint` passes, and values.schema.json rejects misspelt or ill-typed values by name."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import CHART, run_helm


def test_helm_lint_strict(helm: Path) -> None:
    result = run_helm(helm, "lint", "--strict", str(CHART))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"crds": {"enabeld": True}}, "enabeld"),
        ({"replicaCont": 2}, "replicaCont"),
        ({"securityContext": {"readOnlyRootFileSystem": True}}, "readOnlyRootFileSystem"),
        ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
        ({"operator": {"logLevel": "LOUD"}}, "logLevel"),
        ({"ports": {"metrics": 70000}}, "metrics"),
        ({"watchNamespaces": ["Not_A_Namespace"]}, "watchNamespaces"),
    ],
)
def test_misspelt_or_invalid_value_fails_with_schema_error(
    render_error: Callable[[dict[str, Any]], str], values: dict[str, Any], named: str
) -> None:
    message = render_error(values)
    assert "values don't meet the specifications of the schema" in message
    assert named in message


def test_every_object_in_the_schema_forbids_unknown_keys() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    open_maps = {"global", "affinity", "commonLabels"}

    def walk(node: dict[str, Any], path: str) -> list[str]:
        bad = []
        props = node.get("properties")
        if props is not None and node.get("additionalProperties") is not False:
            bad.append(path or "<root>")
        for key, child in (props or {}).items():
            if isinstance(child, dict) and key not in open_maps:
                bad += walk(child, f"{path}.{key}".lstrip("."))
        items = node.get("items")
        if isinstance(items, dict) and path != "operator.extraEnv":
            bad += walk(items, f"{path}[]")
        return bad

    assert walk(schema, "") == []


# Objects whose keys are Kubernetes API fields (documented upstream), not chart settings.
KUBERNETES_TYPED = {"resources", "podSecurityContext", "securityContext", "livenessProbe", "readinessProbe"}


def values_leaves(lines: list[str]) -> list[tuple[str, int]]:
    """(dotted key path, line index) of every `key: value` line of values.yaml, by indentation."""
    stack: list[tuple[int, str]] = []
    leaves = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "- ")) or ":" not in stripped:
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key, rest = stripped.split(":", 1)
        path = ".".join([name for _, name in stack] + [key])
        stack.append((indent, key))
        if rest.strip():
            leaves.append((path, index))
    return leaves


def test_every_values_key_is_in_the_schema_and_documented() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    lines = (CHART / "values.yaml").read_text().splitlines()
    for path, index in values_leaves(lines):
        node = schema
        for part in path.split("."):
            assert part in node.get("properties", {}), f"values.yaml: {path} is not in values.schema.json"
            node = node["properties"][part]
            if part in KUBERNETES_TYPED:
                break
        if path.split(".")[0] in KUBERNETES_TYPED:
            continue
        above = lines[index - 1].strip()
        assert above.startswith("#"), f"values.yaml line {index + 1}: {path} has no comment documenting it"
