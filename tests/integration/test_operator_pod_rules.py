"""Jobs whose pods the API server would refuse fail with a one-line message naming the job's field,
and nothing is created for them: the pod-level cases of tests/unit/api/bad_jobs.yaml (caught by
the renderer's pod rules), plus one only the API server knows (caught by the dry run of the gang).
"""

from __future__ import annotations

import functools
import importlib.util
from types import ModuleType
from typing import Any

import pytest
from hyperframe.constants import LABEL_JOB
from hyperframe_devcluster.kube import Kubectl
from operator_harness import REPO, OperatorProcess, condition, operator, status, wait

pytestmark = pytest.mark.cluster
__all__ = ["operator"]


def _api_helpers() -> ModuleType:
    # One bad-manifest table for the renderer's unit tests and this test.
    path = REPO / "tests" / "unit" / "api" / "api_helpers.py"
    spec = importlib.util.spec_from_file_location("hf_api_test_helpers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


H = _api_helpers()
POD_LEVEL = [c for c in H.bad_jobs() if c.get("pod_level")]
# A rule the renderer does not check (a file mode above 0777): only the API server's dry run
# refuses it, and its message is mapped back to the job's field.
SERVER_ONLY = {
    "name": "config-map-mode-too-big",
    "job": {
        "spec": {
            "volumes": [{"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 4096}}],
            "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}],
        }
    },
    "path": "spec.volumes[0].configMap.defaultMode",
}


def _objects(case: dict[str, Any], namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    job, runtime = H.bad_case_objects(case)
    name = case["name"][:40].rstrip("-")
    runtime["metadata"] = {"name": f"{namespace}-{name}"[:63].rstrip("-")}
    job["metadata"] = {"name": name, "namespace": namespace}
    job["spec"]["runtimeRef"] = {"name": runtime["metadata"]["name"]}
    return job, runtime


def _created(kubectl: Kubectl, namespace: str, name: str) -> list[str]:
    out = kubectl.json("get", "pods,services,configmaps", "-n", namespace, "-l", f"{LABEL_JOB}={name}")
    return [f"{o['kind']}/{o['metadata']['name']}" for o in out["items"]]


def test_pod_level_mistakes_fail_the_job_naming_its_field_before_anything_is_created(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str
) -> None:
    cases = [*POD_LEVEL, SERVER_ONLY]
    assert len(POD_LEVEL) >= 15
    pairs = [_objects(c, namespace) for c in cases]
    kubectl.apply([runtime for _, runtime in pairs])
    kubectl.apply([job for job, _ in pairs])  # the CRD accepts every one of them
    try:
        for case, (job, _) in zip(cases, pairs, strict=True):
            name = job["metadata"]["name"]
            st = wait(
                operator,
                functools.partial(status, kubectl, namespace, name),
                lambda s: s.get("phase") == "Failed",
                what=f"{name} Failed",
            )
            message = st["message"]
            assert "\n" not in message and "{" not in message, f"{name}: {message}"
            assert case["path"] in message, f"{name}: {message}"
            reason = condition(st, "Failed")["reason"]
            assert reason == ("PodRejected" if case is SERVER_ONLY else "InvalidSpec"), (name, st)
            assert _created(kubectl, namespace, name) == [], f"{name}: objects created for a refused job"
        server = status(kubectl, namespace, SERVER_ONLY["name"])["message"]
        assert "spec.volumes[0].configMap.defaultMode: Invalid value: 4096" in server, server
    finally:
        kubectl.run("delete", "hyperframeruntime", *(r["metadata"]["name"] for _, r in pairs), check=False)
