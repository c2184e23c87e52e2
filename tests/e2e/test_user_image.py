"""An ML engineer's own code on the real node: a user image FROM the framework digest, a script job.

Against the session's cluster with its real node `hf-real-0` (docs/local-cluster.md), the way
docs/runtime.md ("Script jobs and your own image") tells it:

1. `hyperframe image build examples/user-project --from RUNTIME` builds the example project FROM
   the runtime's (local) framework digest with the project's BuildKit, pushes it to the cluster's
   registry and prints `repo@sha256:...`; the pushed image's first layers are the framework's;
2. the project's data-prepare step writes its data into a host directory that a PersistentVolume
   and a PersistentVolumeClaim serve, as a platform team would provide one;
3. examples/user-project/job.yaml's DDP torchrun script, from that image (gate and trainer both),
   trains on 2 pods x 2 gloo ranks to Succeeded with its `report()` figures in status.progress;
4. a job naming an image outside the runtime's allowed prefixes fails before any pod exists.

Where the real node cannot run here these tests skip with the reason (fail with CI=true).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hyperframe.constants import LABEL_JOB
from hyperframe_devcluster import demo, paths
from hyperframe_devcluster.cluster import LocalCluster
from hyperframe_devcluster.kube import Kubectl, poll
from hyperframe_devcluster.node import RealNode

pytestmark = pytest.mark.cluster

NS = "e2e-user"
RUNTIME = "real-node-user-images"
PROJECT = paths.repo_root() / "examples" / "user-project"
FLUSH: dict[str, Any] = {
    "operator": {"extraEnv": [{"name": "HYPERFRAME_PROGRESS_FLUSH_SECONDS", "value": "2"}]}
}
_MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json,application/vnd.docker.distribution.manifest.v2+json"
)


@dataclass
class Platform:
    cluster: LocalCluster
    registry: str
    runtime: dict[str, Any]
    kubectl: Kubectl
    env: dict[str, str]
    """The shell of `eval "$(python -m hyperframe_devcluster env)"`: KUBECONFIG, pinned kubectl, registry."""


@pytest.fixture(scope="module")
def platform(
    local_cluster: LocalCluster, real_node: RealNode, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Platform]:
    registry = real_node.registry_address()
    assert registry is not None
    images = local_cluster.config.state_dir / "images"
    demo.build_images(registry, images)
    home = tmp_path_factory.mktemp("helm")
    result = demo.install_operator(local_cluster.kubeconfig, home, images, extra_values=FLUSH)
    assert result.returncode == 0, result.stdout + result.stderr
    # The platform team's runtime: the local CPU profile, letting jobs bring images from ml/ of
    # the cluster's registry.
    runtime = demo.real_node_runtime(images)
    runtime["metadata"]["name"] = RUNTIME
    spec = runtime["spec"]
    spec["allowedOverrides"] = sorted({*spec.get("allowedOverrides", []), "image"})
    spec["images"]["allowedPrefixes"] = [f"{registry}/ml/"]
    kubectl = local_cluster.kubectl
    kubectl.apply([runtime])
    kubectl.run("create", "namespace", NS)
    env = {
        **os.environ,
        "KUBECONFIG": str(local_cluster.kubeconfig),
        "PATH": f"{paths.kubectl().parent}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HYPERFRAME_REGISTRY": registry,
        "PYTHON": sys.executable,
    }
    yield Platform(local_cluster, registry, runtime, kubectl, env)
    demo.helm(
        local_cluster.kubeconfig, home, "uninstall", demo.RELEASE, "-n", demo.RELEASE_NAMESPACE, "--wait"
    )
    kubectl.run("delete", "namespace", NS, "--wait=false", check=False)
    kubectl.run("delete", "pv", "user-project-data", "--wait=false", check=False)


@pytest.fixture(scope="module")
def user_image(platform: Platform) -> str:
    """The reference `hyperframe image build` printed."""
    started = time.monotonic()
    done = subprocess.run(
        [
            "hyperframe",
            "image",
            "build",
            "examples/user-project",
            "--from",
            RUNTIME,
            "--tag",
            f"{platform.registry}/ml/user-project",
        ],
        cwd=paths.repo_root(),
        env=platform.env,
        stdout=subprocess.PIPE,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stdout
    reference = done.stdout.strip().splitlines()[-1]
    print(f"hyperframe image build: {time.monotonic() - started:.1f}s -> {reference}")
    return reference


def _manifest(registry: str, reference: str) -> dict[str, Any]:
    name, digest = reference.removeprefix(f"{registry}/").split("@")
    repo = name.split(":")[0]  # the tag, if any, goes: the digest names the manifest
    request = urllib.request.Request(
        f"http://{registry}/v2/{repo}/manifests/{digest}", headers={"Accept": _MANIFEST_TYPES}
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        data: dict[str, Any] = json.loads(resp.read())
    return data


def _status(kubectl: Kubectl, name: str) -> dict[str, Any]:
    result = kubectl.run("get", "hfj", name, "-n", NS, "-o", "json", check=False)
    return dict(json.loads(result.stdout).get("status", {})) if result.returncode == 0 else {}


def _pods(kubectl: Kubectl, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl.json("get", "pods", "-n", NS, "-l", f"{LABEL_JOB}={name}")["items"]
    return items


def _example_job(name: str, image: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((PROJECT / "job.yaml").read_text()) if d]
    job = next(d for d in docs if d["kind"] == "HyperFrameJob")
    job["metadata"] = {"name": name}
    job["spec"]["runtimeRef"] = {"name": RUNTIME}
    job["spec"]["image"] = image  # what the engineer pastes from `hyperframe image build`
    return dict(job)


def _data_volume(platform: Platform) -> Path:
    """The data-prepare step into a host directory, served by a PersistentVolume and its claim."""
    data = demo.checkpoint_dir(NS, "user-project-data")
    done = subprocess.run(
        [sys.executable, "-m", "user_project.prepare", "--out", str(data)],
        env={**platform.env, "PYTHONPATH": str(PROJECT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (data / "train.pt").chmod(0o644)
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "user-project-data"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadOnlyMany"],
            "storageClassName": "",
            "hostPath": {"path": str(data), "type": "Directory"},
            "claimRef": {"namespace": NS, "name": "user-project-data"},
        },
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "user-project-data", "namespace": NS},
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "storageClassName": "",
            "volumeName": "user-project-data",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    platform.kubectl.apply([volume])
    platform.kubectl.apply([claim], namespace=NS)
    poll(
        lambda: platform.kubectl.json("get", "pvc", "user-project-data", "-n", NS)["status"].get("phase"),
        lambda phase: phase == "Bound",
        timeout_s=120,
        what="the data claim Bound",
    )
    return data


def test_the_example_image_is_built_from_the_framework_digest_and_pushed(
    platform: Platform, user_image: str
) -> None:
    assert re.fullmatch(rf"{re.escape(platform.registry)}/ml/user-project@sha256:[a-f0-9]{{64}}", user_image)
    framework = platform.runtime["spec"]["images"]["framework"]
    base_layers = [layer["digest"] for layer in _manifest(platform.registry, framework)["layers"]]
    layers = [layer["digest"] for layer in _manifest(platform.registry, user_image)["layers"]]
    assert layers[: len(base_layers)] == base_layers, (
        "the user image is not FROM the runtime's framework image"
    )
    assert 1 <= len(layers) - len(base_layers) <= 2  # the project's COPY (and WORKDIR)


def test_a_ddp_script_job_from_the_user_image_succeeds_with_its_progress_in_status(
    platform: Platform, user_image: str
) -> None:
    _data_volume(platform)
    kubectl = platform.kubectl
    applied = time.monotonic()
    kubectl.apply([_example_job("user-ddp", user_image)], namespace=NS)
    seen: list[dict[str, Any]] = []

    def finished(status: dict[str, Any]) -> bool:
        if status.get("phase") == "Running" and status.get("progress"):
            seen.append(status["progress"])
        return status.get("phase") in {"Succeeded", "Failed"}

    status = poll(
        lambda: _status(kubectl, "user-ddp"),
        finished,
        timeout_s=900,
        what="user-ddp to finish",
        interval_s=1.0,
    )
    total = time.monotonic() - applied
    assert status["phase"] == "Succeeded", status.get("message")
    assert status["smokeTest"]["passed"] is True
    progress = status["progress"]
    assert (progress["step"], progress["frame"], progress["totalFrames"]) == (40, 40, 40), progress
    assert 0 <= progress["loss"] < 1.0, progress
    pods = _pods(kubectl, "user-ddp")
    assert len(pods) == 2
    for pod in pods:
        containers = pod["spec"]["initContainers"] + pod["spec"]["containers"]
        assert {c["image"] for c in containers} == {user_image}, "the gate and the trainer run the user image"
    print(
        f"user-ddp: apply -> Succeeded {total:.1f}s; progress seen while Running: {len(seen)} updates; final {progress}"
    )


def test_a_job_whose_image_the_runtime_does_not_allow_is_refused_before_any_pod_exists(
    platform: Platform, user_image: str
) -> None:
    kubectl = platform.kubectl
    outside = user_image.replace(f"{platform.registry}/ml/", f"{platform.registry}/other/")
    kubectl.apply([_example_job("user-outside", outside)], namespace=NS)
    status = poll(
        lambda: _status(kubectl, "user-outside"),
        lambda s: s.get("phase") in {"Failed", "Succeeded", "Running"},
        timeout_s=120,
        what="user-outside to be decided",
    )
    assert status["phase"] == "Failed", status
    assert (
        f"spec.image: {platform.registry}/other/user-project is not under an allowed prefix"
        in status["message"]
    )
    assert f'HyperFrameRuntime "{RUNTIME}"' in status["message"]
    assert _pods(kubectl, "user-outside") == []
