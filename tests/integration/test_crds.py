"""The generated CRDs on the real local control plane (issue 3).

Covers: both CRDs install and become Established; every example applies and the API server
defaults it exactly as the Python models do; `kubectl get hfj/hfr` shows the printer columns
(also after a status-subresource update); every server-checkable bad manifest of
tests/unit/api/bad_jobs.yaml is rejected with a message naming its field (create-time rules and
the immutability transition rules), with exactly the field paths `hyperframe render` gives it
(render evaluates the CRD's own CEL rules), and bad runtimes too; and `hyperframe render` output passes server-side dry-run,
also when rendered from the stored job (uid, ownerReferences) as the operator does.
"""

from __future__ import annotations

import importlib.util
import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from hyperframe.api.crd import CRD_FILES
from hyperframe.api.errors import SpecError
from hyperframe.api.models import job_update_errors, parse_job
from hyperframe.constants import GROUP, JOB_PLURAL, RUNTIME_PLURAL, VERSION
from hyperframe.render import RenderContext, render_job
from hyperframe.render.yamlout import dump_manifests
from hyperframe_devcluster import Kubectl
from server_verdict import server_error_paths

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]


def _load_api_helpers() -> ModuleType:
    # The bad-manifest table and example helpers are shared with the unit tests (one table).
    path = ROOT / "tests" / "unit" / "api" / "api_helpers.py"
    spec = importlib.util.spec_from_file_location("hf_api_test_helpers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


H = _load_api_helpers()
SERVER_CASES = [c for c in H.bad_jobs() if not c.get("render_only")]


@pytest.fixture(scope="module")
def crds(kubectl: Kubectl) -> Iterator[None]:
    existing = kubectl.run("get", "hyperframeruntimes", "-o", "name", check=False).stdout.split()
    for name in CRD_FILES:
        kubectl.run("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds" / name))
    for plural in (JOB_PLURAL, RUNTIME_PLURAL):
        kubectl.run("wait", "--for=condition=Established", f"crd/{plural}.{GROUP}", "--timeout=60s")
    yield
    # Remove only the cluster-scoped runtimes this module created.
    now = kubectl.run("get", "hyperframeruntimes", "-o", "name", check=False).stdout.split()
    for name in set(now) - set(existing):
        kubectl.run("delete", name, "--ignore-not-found", "--wait=false", check=False)


def apply(
    kubectl: Kubectl, namespace: str, objects: list[dict[str, Any]], *extra: str
) -> subprocess.CompletedProcess[str]:
    """kubectl apply of multi-document YAML (a v1 List would be validated client-side instead)."""
    return kubectl.run(
        "apply", "-n", namespace, *extra, "-f", "-", input=dump_manifests(objects), check=False
    )


def test_crds_are_established(kubectl: Kubectl, crds: None) -> None:
    for plural in (JOB_PLURAL, RUNTIME_PLURAL):
        crd = kubectl.json("get", "crd", f"{plural}.{GROUP}")
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions["Established"] == "True" and conditions["NamesAccepted"] == "True"
        assert crd["status"]["acceptedNames"]["shortNames"] in (["hfj"], ["hfr"])


@pytest.mark.parametrize("example", H.example_files())
def test_example_applies_and_server_defaults_match_the_models(
    example: str, kubectl: Kubectl, crds: None, namespace: str
) -> None:
    result = kubectl.run("apply", "-n", namespace, "-f", str(H.EXAMPLES / example), check=False)
    assert result.returncode == 0, result.stderr
    job_file, _rt = H.example_pair(example)
    name = job_file["metadata"]["name"]
    stored = kubectl.json("get", "hfj", name, "-n", namespace)
    # The API server applied the schema defaults; the models apply the same ones.
    assert parse_job(stored).spec == parse_job(job_file).spec
    assert stored["spec"]["frames"]["schedulePolicy"] == job_file["spec"]["frames"].get(
        "schedulePolicy", "hyperframe"
    )
    assert stored["spec"]["runPolicy"]["cleanPodPolicy"] == job_file["spec"].get("runPolicy", {}).get(
        "cleanPodPolicy", "Running"
    )


def test_printer_columns(kubectl: Kubectl, crds: None, namespace: str) -> None:
    kubectl.run("apply", "-n", namespace, "-f", str(H.EXAMPLES / "gpu-pipeline.yaml"))
    kubectl.run(
        "patch",
        "hfj",
        "gpt-medium-pp4",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(
            {"status": {"phase": "Running", "restarts": 1, "progress": {"frame": 12, "totalFrames": 2000}}}
        ),
    )
    out = kubectl.run("get", "hfj", "-n", namespace).stdout.splitlines()
    assert out[0].split() == ["NAME", "PHASE", "NODES", "GPUS", "FRAME", "FRAMES", "RESTARTS", "AGE"]
    assert out[1].split()[:7] == ["gpt-medium-pp4", "Running", "2", "8", "12", "2000", "1"]
    rt = kubectl.run("get", "hfr", "example-cuda13").stdout.splitlines()
    assert rt[0].split() == ["NAME", "ACCELERATOR", "TORCH", "CUDA", "NCCL", "AGE"]
    assert rt[1].split()[:5] == ["example-cuda13", "nvidia-gpu", "2.13.0+cu130", "13.0.3", "2.29.7"]


def test_status_schema_rejects_an_unknown_phase(kubectl: Kubectl, crds: None, namespace: str) -> None:
    kubectl.run("apply", "-n", namespace, "-f", str(H.EXAMPLES / "cpu-tiny.yaml"))
    result = kubectl.run(
        "patch",
        "hfj",
        "cpu-tiny",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status": {"phase": "Dancing"}}',
        check=False,
    )
    assert result.returncode != 0 and "status.phase" in result.stderr


@pytest.fixture(scope="module")
def shared_namespace(kubectl: Kubectl, crds: None) -> Iterator[str]:
    """One namespace for all bad-manifest cases: nothing but jobs goes in, so no per-test setup."""
    name = f"t-crd-bad-{secrets.token_hex(3)}"
    kubectl.run("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


@pytest.mark.parametrize("case", SERVER_CASES, ids=[c["name"] for c in SERVER_CASES])
def test_bad_manifest_is_rejected_naming_the_field(
    case: dict[str, Any], kubectl: Kubectl, shared_namespace: str
) -> None:
    job, _rt = H.bad_case_objects(case)
    if "name" not in case.get("job", {}).get("metadata", {}):
        job["metadata"]["name"] = f"bad-{SERVER_CASES.index(case)}"
    name = job["metadata"]["name"]
    try:
        if "update" in case:
            created = apply(kubectl, shared_namespace, [job])
            assert created.returncode == 0, created.stderr
            job = H.patched(job, case["update"])
        result = apply(kubectl, shared_namespace, [job])
        assert result.returncode != 0, f"{case['name']} was accepted"
        expected = case.get("server", case["path"])
        assert expected in result.stderr, result.stderr
        if "problem" in case:
            assert case["problem"] in result.stderr
    finally:
        if "update" in case:  # rejected creates store nothing
            kubectl.run("delete", "hfj", name, "-n", shared_namespace, "--wait=false", check=False)


def _render_paths(job: dict[str, Any], runtime: dict[str, Any]) -> list[str]:
    try:
        render_job(job, runtime, RenderContext())
    except SpecError as exc:
        return exc.paths()
    return []


@pytest.mark.parametrize("case", SERVER_CASES, ids=[c["name"] for c in SERVER_CASES])
def test_server_and_render_give_the_same_verdict_and_field_paths(
    case: dict[str, Any], kubectl: Kubectl, kubeconfig: Path, shared_namespace: str
) -> None:
    # One set of rules: render evaluates the CRD's own CEL rules, so every field path the API
    # server rejects a bad job for is one render rejects it for, and no other.
    job, runtime = H.bad_case_objects(case)
    name = job["metadata"]["name"] = (
        case.get("job", {}).get("metadata", {}).get("name", f"same-{SERVER_CASES.index(case)}")
    )
    collection = f"/apis/{GROUP}/{VERSION}/namespaces/{shared_namespace}/{JOB_PLURAL}"
    if "update" in case:
        try:
            created = apply(kubectl, shared_namespace, [job])
            assert created.returncode == 0, created.stderr
            stored = kubectl.json("get", "hfj", name, "-n", shared_namespace)
            changed = H.patched(stored, case["update"])
            server = server_error_paths(kubeconfig, collection, changed, update_of=name)
            render = [e.path for e in job_update_errors(changed, stored)]
        finally:
            kubectl.run("delete", "hfj", name, "-n", shared_namespace, "--wait=false", check=False)
    else:
        server = server_error_paths(kubeconfig, collection, job)
        render = _render_paths(job, runtime)
    assert case["path"] in server, server
    assert sorted(set(render)) == sorted(set(server))


@pytest.mark.parametrize("example", H.example_files())
def test_render_output_passes_server_dry_run(
    example: str, kubectl: Kubectl, crds: None, namespace: str
) -> None:
    exe = Path(sys.executable).with_name("hyperframe")
    rendered = subprocess.run(
        [str(exe), "render", str(H.EXAMPLES / example), "-n", namespace],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # Exactly what a user pipes: hyperframe render job.yaml -n NS | kubectl apply --dry-run=server -f -
    result = kubectl.run("apply", "--dry-run=server", "-f", "-", input=rendered, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("(server dry run)") == len([o for o in yaml.safe_load_all(rendered) if o])


def test_operator_style_render_from_the_stored_job_passes_dry_run(
    kubectl: Kubectl, crds: None, namespace: str
) -> None:
    kubectl.run("apply", "-n", namespace, "-f", str(H.EXAMPLES / "gpu-rdma.yaml"))
    stored = kubectl.json("get", "hfj", "llm-rdma", "-n", namespace)
    runtime = kubectl.json("get", "hfr", "example-cuda13-rdma")
    ctx = RenderContext(
        gang_generation=2, excluded_nodes=("node-x",), status_url="https://op.svc:8443/progress"
    )
    objects = render_job(stored, runtime, ctx)
    assert all(o["metadata"]["ownerReferences"][0]["uid"] == stored["metadata"]["uid"] for o in objects)
    result = apply(kubectl, namespace, objects, "--dry-run=server")
    assert result.returncode == 0, result.stderr


def test_server_rejects_what_render_rejects_for_the_cel_product_rule(
    kubectl: Kubectl, crds: None, namespace: str
) -> None:
    # One wording: render evaluates the same CEL messageExpression the server prints.
    job, _ = H.example_pair("gpu-pipeline.yaml")
    job = H.patched(job, {"spec": {"parallelism": {"pipeline": 4, "data": 3}}})
    result = apply(kubectl, namespace, [job])
    assert "spec.parallelism" in result.stderr
    assert "pipeline (4) x data (3) = 12, but nodes (2) x gpusPerNode (8) = 16" in result.stderr


def test_kubectl_errors_name_fields_not_internal_paths(kubectl: Kubectl, crds: None, namespace: str) -> None:
    job, _ = H.example_pair("cpu-2node.yaml")
    job = H.patched(job, {"spec": {"nodes": 0, "frames": {"schedulePolicy": "pipedream"}}})
    result = apply(kubectl, namespace, [job])
    assert result.returncode != 0
    # Both problems at once, each under its field path.
    assert "spec.nodes" in result.stderr and "spec.frames.schedulePolicy" in result.stderr
    assert kubectl.run("get", "hfj", "-n", namespace, "-o", "name").stdout == ""


RUNTIME_CASES = [
    (
        "unpinned-image",
        {"spec": {"images": {"framework": "ghcr.io/hyperframe-dev/framework:latest"}}},
        "spec.images.framework",
    ),
    ("rdma-on-cpu-profile", {"spec": {"pod": {"rdma": {"enabled": True}}}}, "spec.pod.rdma.enabled"),
    ("unknown-override", {"spec": {"allowedOverrides": ["hostPID"]}}, "spec.allowedOverrides[0]"),
    ("image-without-prefixes", {"spec": {"allowedOverrides": ["image"]}}, "spec.images.allowedPrefixes"),
    ("shm-not-a-quantity", {"spec": {"pod": {"shmSize": "plenty"}}}, "spec.pod.shmSize"),
    (
        "plugins-pod-group-without-scheduler",
        {"spec": {"gang": {"podGroup": "SchedulerPlugins"}}},
        "spec.pod.schedulerName",
    ),
    (
        "reserved-golden-env",
        {"spec": {"pod": {"env": [{"name": "MASTER_PORT", "value": "1"}]}}},
        "spec.pod.env[0].name",
    ),
]


@pytest.mark.parametrize(("name", "patch", "path"), RUNTIME_CASES, ids=[c[0] for c in RUNTIME_CASES])
def test_bad_runtime_is_rejected_naming_the_field(
    name: str, patch: dict[str, Any], path: str, kubectl: Kubectl, crds: None
) -> None:
    _job, runtime = H.example_pair("cpu-tiny.yaml")
    runtime = H.patched(runtime, {"metadata": {"name": f"bad-{name}"}, **patch})
    result = kubectl.run("apply", "-f", "-", input=dump_manifests([runtime]), check=False)
    assert result.returncode != 0, f"{name} was accepted"
    assert path in result.stderr, result.stderr
