"""An ML engineer's own code on the real node: a user image FROM the framework digest, a script job.

Against the session's cluster with its real node `hf-real-0` (docs/local-cluster.md), the way
the README's "Train your own model" tells it, whose commands are read from the README and run as
written (tests/unit/test_readme_train_your_own_model.py checks them against the files they name):

1. the README's `hyperframe image build examples/user-project --from example-cpu-user-images`
   builds the example project FROM the runtime's (local) framework digest with the project's
   BuildKit, pushes it to the cluster's registry and prints `repo@sha256:...`; the pushed image's
   first layers are the framework's (built once, for every test here);
2. examples/user-project/job.yaml's DDP torchrun script, from that image (gate and trainer both),
   trains on 2 pods x 2 gloo ranks to Succeeded with its `report()` figures in status.progress,
   its data on a PersistentVolume of a host directory that the project's data-prepare step wrote;
3. the README's volume, token shards and job-hf.yaml: the user's Hugging Face module trains with
   its data, snapshots and TensorBoard files on examples/user-project/volume.yaml's
   PersistentVolume (a directory of the real node); every process of the trainer's container is
   SIGKILLed mid-run, the gang resumes from the last snapshot with the data loader's exact
   position (the run's own metrics.jsonl, snapshot and log say so) and the job Succeeds; the
   files are then on the volume's host directory;
4. a job naming an image outside the runtime's allowed prefixes fails before any pod exists.

Where the real node cannot run here these tests skip with the reason (fail with CI=true).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
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
from hyperframe.constants import LABEL_GENERATION, LABEL_JOB, MAIN_CONTAINER_NAME
from hyperframe_devcluster import demo, paths
from hyperframe_devcluster.cluster import LocalCluster
from hyperframe_devcluster.doc_blocks import section_blocks
from hyperframe_devcluster.kube import Kubectl, poll
from hyperframe_devcluster.node import RealNode
from hyperframe_runtime.pipeline.checkpoint import META_FILE, complete_snapshots, snapshot_dir
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

pytestmark = pytest.mark.cluster

NS = "e2e-user"
RUNTIME = "example-cpu-user-images"  # the README's (and the example jobs') runtime
PROJECT = paths.repo_root() / "examples" / "user-project"
README_SECTION = "Train your own model"
HF_NS = "ml"  # volume.yaml's namespace, where the README applies the job
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
        "HYPERFRAME_CLUSTER_DIR": str(local_cluster.config.state_dir),  # for the README's `env`
        "PYTHON": sys.executable,
    }
    yield Platform(local_cluster, registry, runtime, kubectl, env)
    demo.helm(
        local_cluster.kubeconfig, home, "uninstall", demo.RELEASE, "-n", demo.RELEASE_NAMESPACE, "--wait"
    )
    kubectl.run("delete", "namespace", NS, HF_NS, "--wait=true", "--timeout=120s", check=False)
    kubectl.run(
        "delete", "pv", "user-project-data", _hf_volume()["metadata"]["name"], "--wait=false", check=False
    )
    shutil.rmtree(_volume_dir(), ignore_errors=True)
    with contextlib.suppress(OSError):  # the README's `install -d` made it; other volumes may share it
        _volume_dir().parent.rmdir()


def _readme_blocks() -> list[str]:
    """The README's commands: [0] builds the image into $IMAGE, then the volume and data, the job."""
    return section_blocks(paths.repo_root() / "README.md", README_SECTION)


def _bash(script: str) -> list[str]:
    return ["bash", "-euo", "pipefail", "-c", script]


def _yaml_docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((PROJECT / name).read_text()) if d]


def _hf_volume() -> dict[str, Any]:
    return next(d for d in _yaml_docs("volume.yaml") if d["kind"] == "PersistentVolume")


def _volume_dir() -> Path:
    """The host directory behind volume.yaml's PersistentVolume (the real node sees the host's /var/tmp)."""
    return Path(_hf_volume()["spec"]["hostPath"]["path"])


def _hf_job() -> dict[str, Any]:
    return next(d for d in _yaml_docs("job-hf.yaml") if d["kind"] == "HyperFrameJob")


@pytest.fixture(scope="module")
def user_image(platform: Platform) -> str:
    """The reference the README's `hyperframe image build` printed (its $IMAGE)."""
    started = time.monotonic()
    done = subprocess.run(
        _bash(_readme_blocks()[0] + 'printf "%s\\n" "$IMAGE"\n'),
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


def _job_object(kubectl: Kubectl, name: str, ns: str = NS) -> dict[str, Any]:
    result = kubectl.run("get", "hfj", name, "-n", ns, "-o", "json", check=False)
    return dict(json.loads(result.stdout)) if result.returncode == 0 else {}


def _status(kubectl: Kubectl, name: str, ns: str = NS) -> dict[str, Any]:
    return dict(_job_object(kubectl, name, ns).get("status", {}))


def _pods(kubectl: Kubectl, name: str, ns: str = NS) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl.json("get", "pods", "-n", ns, "-l", f"{LABEL_JOB}={name}")["items"]
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


def _metrics(volume: Path, job: str) -> list[dict[str, Any]]:
    """metrics.jsonl as far as it is written (a line being written is left out)."""
    path = volume / "metrics" / job / "metrics.jsonl"
    records = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            records.append(json.loads(line))
        except ValueError:
            break
    return records


def _kill_the_trainer_mid_run(
    kubectl: Kubectl, readme: subprocess.Popen[str], volume: Path, job: str
) -> tuple[int, int]:
    """SIGKILL every process of the trainer's container once a snapshot is complete and a frame after
    it is in metrics.jsonl; (that snapshot's frame, the last frame in metrics.jsonl then)."""

    def state() -> tuple[int | None, str, list[int], int]:
        found = _job_object(kubectl, job, HF_NS)
        uid = found.get("metadata", {}).get("uid")
        snapshots = complete_snapshots(volume / f"{job}-{uid}") if uid else []
        frames = [r["frame"] for r in _metrics(volume, job)]
        phase = str(found.get("status", {}).get("phase", ""))
        return readme.poll(), phase, snapshots, max(frames, default=0)

    rc, phase, snapshots, frame = poll(
        state,
        lambda s: s[0] is not None or s[1] == "Failed" or (bool(s[2]) and s[3] > s[2][-1]),
        timeout_s=1500,
        what=f"a snapshot of {job} and a frame after it",
        interval_s=0.5,
    )
    assert rc is None and phase != "Failed", f"the README's commands ended (exit {rc}) or {job} is {phase}"
    [pod] = _pods(kubectl, job, HF_NS)
    # The trainer's main process is tini's child; killing it makes the container exit non-zero.
    kubectl.run("exec", "-n", HF_NS, pod["metadata"]["name"], "-c", MAIN_CONTAINER_NAME, "--",
                "python3", "-c", "import os, signal; os.kill(-1, signal.SIGKILL)", check=False)  # fmt: skip
    return snapshots[-1], frame


def test_the_readme_trains_your_own_model_on_the_volume_and_resumes_a_killed_trainer_exactly(
    platform: Platform, user_image: str, tmp_path: Path
) -> None:
    kubectl = platform.kubectl
    job = _hf_job()
    name, spec = job["metadata"]["name"], job["spec"]
    frames = spec["frames"]["frames"]
    every = spec["frames"]["checkpoint"]["everyFrames"]
    # Samples per frame of the one data-parallel replica: what its loader position counts.
    samples = spec["frames"]["microBatchesPerFrame"] * spec["frames"]["microBatchSize"]
    volume = _volume_dir()
    shutil.rmtree(volume, ignore_errors=True)  # an earlier session's files: the README makes it anew
    log = tmp_path / "readme.log"
    started = time.monotonic()
    with log.open("w") as out:
        readme = subprocess.Popen(
            _bash("".join(_readme_blocks()[1:])),
            cwd=paths.repo_root(),
            env={**platform.env, "IMAGE": user_image},  # what the README's first block set
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        snapshot, last = _kill_the_trainer_mid_run(kubectl, readme, volume, name)
        killed = time.monotonic()
        rc, status = poll(
            lambda: (readme.poll(), _status(kubectl, name, HF_NS)),
            lambda s: s[0] is not None or s[1].get("phase") == "Failed",
            timeout_s=1500,
            what=f"the README's commands to end ({name} to Succeed)",
            interval_s=1.0,
        )
    finally:
        if readme.poll() is None:
            readme.kill()
            readme.wait()
    total, after_kill = time.monotonic() - started, time.monotonic() - killed
    output = log.read_text()
    assert rc == 0 and status.get("phase") == "Succeeded", f"exit {rc}, {status}\n{output[-4000:]}"
    assert status["restarts"] == 1, status
    assert status["progress"]["frame"] == frames, status["progress"]
    assert "metrics.jsonl" in output and "tensorboard" in output, output[-2000:]  # the README's `ls`

    # The new gang's log: resumed from a snapshot, not from frame 0.
    pods = _pods(kubectl, name, HF_NS)
    newest = max(pods, key=lambda p: int(p["metadata"]["labels"][LABEL_GENERATION]))
    logs = kubectl.run("logs", "-n", HF_NS, newest["metadata"]["name"], "-c", MAIN_CONTAINER_NAME).stdout
    resumed = {int(k) for k in re.findall(r"resumed from \S+/frame-\d+: (\d+) frames done", logs)}
    assert len(resumed) == 1, logs[-3000:]
    [start] = resumed
    assert start >= snapshot >= every and start % every == 0, (start, snapshot)

    # metrics.jsonl, the run's own record: frames 1..k of the killed gang (k >= the snapshot), then
    # the resumed gang's from the frame after its snapshot to the last, no gap, no other repeat.
    records = _metrics(volume, name)
    cut = len(records) - (frames - start)
    first, second = records[:cut], records[cut:]
    assert [r["frame"] for r in first] == list(range(1, cut + 1)) and cut >= max(start, last), (
        [r["frame"] for r in records], start, last,
    )  # fmt: skip
    assert [r["frame"] for r in second] == list(range(start + 1, frames + 1)), [r["frame"] for r in records]
    if cut > start:
        # Frame start+1 ran twice: the same weights on the same samples give the same loss.
        assert second[0]["loss"] == pytest.approx(first[start]["loss"], rel=1e-4), (first[start], second[0])
    # The last snapshot's loader read exactly every frame's samples once (a restart of the data
    # order at the resume would have read (frames - start) x samples by the end).
    job_dir = volume / f"{name}-{_job_object(kubectl, name, HF_NS)['metadata']['uid']}"
    assert complete_snapshots(job_dir)[-1] == frames
    meta = json.loads((snapshot_dir(job_dir, frames) / META_FILE).read_text())
    assert (meta["frames_done"], meta["data"]["position"]) == (frames, frames * samples), meta

    # TensorBoard: one event file per gang, every frame's loss.
    board_dir = volume / "metrics" / name / "tensorboard"
    assert len(list(board_dir.glob("events.out.tfevents.*"))) >= 2, sorted(
        p.name for p in board_dir.iterdir()
    )
    board = EventAccumulator(str(board_dir), size_guidance={"scalars": 0})
    board.Reload()
    assert {e.step for e in board.Scalars("train/loss")} == set(range(1, frames + 1))
    print(
        f"{name}: README's volume, data, apply and wait {total:.1f}s; trainer killed at frame {last} "
        f"(snapshot {snapshot}), resumed from {start}; kill -> Succeeded {after_kill:.1f}s; "
        f"loss {records[0]['loss']:.3f} -> {records[-1]['loss']:.3f}"
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
