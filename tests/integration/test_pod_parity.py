"""Render refuses a pod-level bad job exactly when the API server would refuse its pod, at the same field.

For every pod-level case of tests/unit/api/bad_jobs.yaml the CRD accepts the job, so the only
other judge is the API server's own pod validation. The test renders the case's pod with render's
pod checks switched off (render's own pod rules and its core/v1 schema check: the very checks under
test), sends that pod to the API server as a dry-run create, maps the server's error fields back to
the job's fields with the renderer's field map (as the operator does), and requires the case's field
among them. A decoding error names its field without list indices, and a malformed quantity names
none: there only the indices, or only the verdict, are compared.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import hyperframe.api.resolve
import hyperframe.render
import pytest
from hyperframe.api.errors import SpecError
from hyperframe.render import RenderContext, render_job, render_pod
from hyperframe.render.field_map import job_field_of_pod_field
from server_verdict import server_errors

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]


def _api_helpers() -> ModuleType:
    path = ROOT / "tests" / "unit" / "api" / "api_helpers.py"
    spec = importlib.util.spec_from_file_location("hf_api_test_helpers_pods", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


H = _api_helpers()
POD_CASES = [c for c in H.bad_jobs() if c.get("pod_level")]


_DECODED = re.compile(r"Go struct field \w+\.(\S+) of type")
_CONTAINER = re.compile(r"^spec\.(?:initContainers|containers)(?:\[\d+\])?\.(env|volumeMounts)\.")


def _job_fields(job: dict[str, Any], runtime: dict[str, Any], errors: list[tuple[str, str]]) -> set[str]:
    """The job fields of the server's errors; a decoding error's field (no indices, Go's embedded
    struct names) and a pod path without its list index are kept index-free, marked by ``~``."""
    fields = set()
    for field, message in errors:
        if decoded := _DECODED.search(message):
            path = ".".join(p for p in decoded.group(1).split(".") if not p[:1].isupper())
            fields.add("~" + _CONTAINER.sub(r"spec.\1.", path))
        elif _CONTAINER.match(field):  # e.g. spec.containers[0].volumeMounts.subPath
            fields.add("~" + _CONTAINER.sub(r"spec.\1.", field))
        else:
            fields.add(job_field_of_pod_field(job, runtime, field, RenderContext()) or field)
    return fields


def _without_indices(path: str) -> str:
    return re.sub(r"\[[^\]]*\]", "", path)


def _same_field(render: str, server: str) -> bool:
    """The same field, or one nested in the other (the server names ``spec.nodeSelector`` for a
    bad key, render the key; render names the volume with two sources, the server its second
    source), or the same field name under the server's parent (the server names a projected
    token's missing path ``projected.path``)."""
    if server.startswith("~"):
        render, server = _without_indices(render), server[1:]
    parent, _, name = server.rpartition(".")
    return (
        render == server
        or render.startswith((f"{server}.", f"{server}["))
        or server.startswith((f"{render}.", f"{render}["))
        or (bool(parent) and render.startswith(f"{parent}.") and render.endswith(f".{name}"))
    )


@pytest.mark.parametrize("case", POD_CASES, ids=[c["name"] for c in POD_CASES])
def test_render_and_the_api_server_refuse_the_pod_at_the_same_field(
    case: dict[str, Any], kubeconfig: Path, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, runtime = H.bad_case_objects(case)
    job["metadata"]["namespace"] = namespace
    with pytest.raises(SpecError) as refused:
        render_job(job, runtime, RenderContext())
    assert case["path"] in refused.value.paths()

    with monkeypatch.context() as m:
        m.setattr(hyperframe.api.resolve, "pod_field_errors", lambda *a, **k: [])
        m.setattr(hyperframe.render, "_checked", lambda p, objects: objects)
        pod = render_pod(job, runtime, 0, RenderContext())
        errors = server_errors(kubeconfig, f"/api/v1/namespaces/{namespace}/pods", pod)
        assert errors, f"the API server accepts the pod of {case['name']}"
        fields = _job_fields(job, runtime, errors)
    if any(f.startswith("(no field") for f in fields):
        assert "quantities must match" in errors[0][1], errors
        return  # the server names no field for a malformed quantity: the verdict is the same
    assert any(_same_field(case["path"], f) for f in fields), (case["path"], fields, errors)
