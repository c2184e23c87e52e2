"""The images `make images` builds, tested as built: images/build.sh runs twice per session against
a private registry (Debian's docker-registry on a free loopback port), then the tests read what
the registry holds and run the framework image with runc.

What is checked, on the `local` profile of images/matrix.yaml:
- the recorded digests (digests.json) are the registry's own manifest digests, and the runtimes and
  Helm values written for the cluster pin exactly those;
- the framework image carries torch and hyperframe-runtime but not the operator's stack (kopf,
  kubernetes, aiohttp, prometheus-client), which the operator image does carry;
- the image contract: the matrix's non-root user, hyperframe-smoke/-launch/-train and torchrun on
  PATH, `import torch, hyperframe_runtime` works, the OCI labels carry the matrix's versions;
- a second build without changes reuses every layer (same layer digests, every step CACHED).

Where no engine can exist (not root, no runc) the module is skipped with the reason; with CI=true
it fails instead, because CI must build the images. Cold, the first build takes about nine and a
half minutes on a 2-core machine (docs/images.md); the rebuild, and both builds when warm, under
three minutes.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
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
from hyperframe.images.matrix import DebootstrapBase, Matrix, Profile
from hyperframe.images.repo import load_matrix
from hyperframe_devcluster import prereqs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(5400)]

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "images/build.sh"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
OPERATOR_EXTRA = ("kopf", "kubernetes", "aiohttp", "prometheus_client")
SCRIPTS = ("hyperframe-smoke", "hyperframe-launch", "hyperframe-train", "torchrun")


def _no_engine_reason() -> str | None:
    if os.geteuid() != 0:
        return f"BuildKit's OCI worker needs root here; this is uid {os.geteuid()}"
    try:
        # The same Debian packages as the real node's (runc, docker-registry, debootstrap), installed
        # with apt-get when missing, so a fresh machine needs no step by hand.
        prereqs.ensure()
    except prereqs.PrerequisiteError as error:
        return str(error)
    if shutil.which("runc") is None:
        return "runc is not installed (apt-get install runc)"
    if shutil.which("docker-registry") is None:
        return "Debian's docker-registry is not installed (apt-get install docker-registry)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Registry:
    address: str

    def get(
        self, path: str, accept: str = f"{OCI_MANIFEST}, {DOCKER_MANIFEST}"
    ) -> tuple[bytes, dict[str, str]]:
        request = urllib.request.Request(f"http://{self.address}{path}", headers={"Accept": accept})
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.read(), dict(response.headers)

    def _split(self, ref: str) -> tuple[str, str]:
        """`host/repo:tag` or `host/repo@sha256:...` -> (repo, tag or digest)."""
        name, sep, digest = ref.removeprefix(self.address + "/").partition("@")
        if sep:
            return name.rsplit(":", 1)[0] if ":" in name else name, digest
        repo, tag = name.rsplit(":", 1)
        return repo, tag

    def manifest(self, ref: str) -> tuple[dict[str, Any], str]:
        """The manifest of `host/repo:tag` or `host/repo@sha256:...`, and the registry's digest of it."""
        repo, reference = self._split(ref)
        body, headers = self.get(f"/v2/{repo}/manifests/{reference}")
        return json.loads(body), headers["Docker-Content-Digest"]

    def config(self, ref: str) -> dict[str, Any]:
        manifest, _ = self.manifest(ref)
        repo, _ = self._split(ref)
        body, _ = self.get(f"/v2/{repo}/blobs/{manifest['config']['digest']}", accept="*/*")
        return dict(json.loads(body))

    def layer_url(self, ref: str, digest: str) -> str:
        repo, _ = self._split(ref)
        return f"http://{self.address}/v2/{repo}/blobs/{digest}"


@dataclass(frozen=True)
class Built:
    registry: Registry
    matrix: Matrix
    profile: Profile
    out: Path
    digests: dict[str, str]
    logs: tuple[str, str]
    seconds: tuple[float, float]
    layers: tuple[dict[str, list[str]], dict[str, list[str]]]


def _build(registry: str, out: Path) -> tuple[str, float]:
    env = {
        **os.environ,
        "HYPERFRAME_REGISTRY": registry,
        "HYPERFRAME_IMAGES_DIR": str(out),
        "PYTHON": sys.executable,
    }
    start = time.monotonic()
    result = subprocess.run(
        ["bash", str(BUILD)], cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=3000
    )
    seconds = time.monotonic() - start
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"images/build.sh failed ({result.returncode}):\n{log[-6000:]}"
    return log, seconds


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    reason = _no_engine_reason()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and no image engine can run here: {reason}")
        pytest.skip(f"no image engine can run here: {reason}")
    tmp = tmp_path_factory.mktemp("images")
    port = _free_port()
    config = tmp / "registry.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "version": 0.1,
                "log": {"level": "warn"},
                "storage": {"filesystem": {"rootdirectory": str(tmp / "storage")}},
                "http": {"addr": f"127.0.0.1:{port}"},
            }
        ),
        encoding="utf-8",
    )
    with (tmp / "registry.log").open("w") as log:
        process = subprocess.Popen(
            ["docker-registry", "serve", str(config)], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        registry = Registry(f"127.0.0.1:{port}")
        for _ in range(100):
            try:
                registry.get("/v2/", accept="*/*")
                break
            except OSError:
                time.sleep(0.1)
        m = load_matrix(ROOT)
        profile = m.local_profiles[0]
        first_log, first_s = _build(registry.address, tmp / "out1")
        second_log, second_s = _build(registry.address, tmp / "out2")
        digests = json.loads((tmp / "out2/digests.json").read_text(encoding="utf-8"))

        def layers(out: Path) -> dict[str, list[str]]:
            refs = json.loads((out / "digests.json").read_text(encoding="utf-8"))
            return {
                name: [x["digest"] for x in registry.manifest(ref)[0]["layers"]] for name, ref in refs.items()
            }

        yield Built(
            registry=registry,
            matrix=m,
            profile=profile,
            out=tmp / "out2",
            digests=digests,
            logs=(first_log, second_log),
            seconds=(first_s, second_s),
            layers=(layers(tmp / "out1"), layers(tmp / "out2")),
        )
    finally:
        process.terminate()
        process.wait(timeout=30)
        shutil.rmtree(tmp / "storage", ignore_errors=True)


@pytest.fixture(scope="module")
def framework_rootfs(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The framework image's file system, its layers applied in order (whiteouts honoured)."""
    ref = built.digests["hyperframe-framework"]
    rootfs = tmp_path_factory.mktemp("framework") / "rootfs"
    rootfs.mkdir()
    manifest, _ = built.registry.manifest(ref)
    for layer in manifest["layers"]:
        with urllib.request.urlopen(built.registry.layer_url(ref, layer["digest"]), timeout=600) as blob:
            _untar(blob, rootfs, str(layer["mediaType"]))
    yield rootfs
    shutil.rmtree(rootfs, ignore_errors=True)


def _untar(stream: Any, rootfs: Path, media_type: str) -> None:
    compression = {"zstd": ["--zstd"], "gzip": ["--gzip"]}.get(media_type.rsplit("+", 1)[-1], [])
    tar = subprocess.Popen(
        ["tar", "-x", *compression, "-C", str(rootfs), "--numeric-owner", "-p"], stdin=subprocess.PIPE
    )
    assert tar.stdin is not None
    shutil.copyfileobj(stream, tar.stdin, 1 << 20)
    tar.stdin.close()
    assert tar.wait() == 0
    for marker in list(rootfs.rglob(".wh.*")):
        if marker.name == ".wh..wh..opq":
            for child in marker.parent.iterdir():
                if child != marker:
                    shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        else:
            target = marker.parent / marker.name.removeprefix(".wh.")
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
        marker.unlink()


def _run_in_image(built: Built, rootfs: Path, args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    """Run `args` in the framework image with runc, as the image's user, env and working dir."""
    config = built.registry.config(built.digests["hyperframe-framework"])["config"]
    bundle = tmp / f"bundle-{len(list(tmp.iterdir()))}"
    bundle.mkdir()
    subprocess.run(["runc", "spec", "--bundle", str(bundle)], check=True)
    spec = json.loads((bundle / "config.json").read_text(encoding="utf-8"))
    uid, _, gid = str(config["User"]).partition(":")
    spec["root"] = {"path": str(rootfs), "readonly": True}
    spec["process"].update(
        terminal=False,
        args=args,
        env=config["Env"],
        cwd=config.get("WorkingDir") or "/",
        user={"uid": int(uid), "gid": int(gid or uid)},
    )
    (bundle / "config.json").write_text(json.dumps(spec), encoding="utf-8")
    return subprocess.run(
        ["runc", "--root", str(tmp / "runc-state"), "run", "--bundle", str(bundle), bundle.name],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_recorded_digests_are_the_registrys(built: Built) -> None:
    m, p = built.matrix, built.profile
    expected = {
        "hyperframe-operator": m.operator_repository(built.registry.address),
        "hyperframe-base": m.base_repository(built.registry.address),
        "hyperframe-framework": m.framework_repository(built.registry.address),
    }
    assert {name: ref.split("@")[0] for name, ref in built.digests.items()} == expected
    tags = {
        "hyperframe-operator": m.operator_image(built.registry.address, profile=p),
        "hyperframe-base": m.base_image(p, built.registry.address),
        "hyperframe-framework": m.framework_image(p, built.registry.address),
    }
    for name, ref in built.digests.items():
        _, by_tag = built.registry.manifest(tags[name])
        _, by_digest = built.registry.manifest(ref)
        assert ref.endswith("@" + by_tag) and by_digest == by_tag, name


def test_cluster_files_pin_the_pushed_digests(built: Built) -> None:
    framework = built.digests["hyperframe-framework"].split("@")[1]
    runtimes = [d for d in yaml.safe_load_all((built.out / "runtimes-local.yaml").read_text()) if d]
    assert {d["metadata"]["name"] for d in runtimes} >= {built.profile.name, "example-cpu"}
    for doc in runtimes:
        assert doc["spec"]["images"]["framework"].endswith("@" + framework)
        assert "sha256:" + "0" * 64 not in yaml.safe_dump(doc)
    values = yaml.safe_load((built.out / "values-local.yaml").read_text())
    assert values["image"]["digest"] == built.digests["hyperframe-operator"].split("@")[1]
    assert values["runtimes"]["exclude"] == [p.name for p in built.matrix.released_profiles]
    rendered = subprocess.run(
        [sys.executable, "-m", "hyperframe.cli", "render", "examples/cpu-tiny.yaml", "--runtime",
         str(built.out / "runtimes-local.yaml")],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    assert f"@{framework}" in rendered.stdout


def test_oci_labels_carry_the_matrix_versions(built: Built) -> None:
    m, p = built.matrix, built.profile
    framework = built.registry.config(built.digests["hyperframe-framework"])["config"]
    labels = framework["Labels"]
    assert labels["org.opencontainers.image.version"] == m.version
    assert labels["dev.hyperframe.torch"] == p.torch.local_version
    assert labels["dev.hyperframe.nccl"] == p.torch.nccl
    assert labels["dev.hyperframe.python"] == p.python
    assert labels["dev.hyperframe.profile"] == p.name
    assert isinstance(p.base, DebootstrapBase)
    assert labels["org.opencontainers.image.base.name"] == p.base.command
    assert labels["org.opencontainers.image.base.digest"].startswith("sha256:")
    assert len(labels["org.opencontainers.image.base.digest"]) == len("sha256:") + 64
    assert framework["User"] == f"{m.image_user.uid}:{m.image_user.uid}"
    operator = built.registry.config(built.digests["hyperframe-operator"])["config"]
    assert operator["User"] == f"{m.image_user.uid}:{m.image_user.uid}"
    assert operator["Labels"]["dev.hyperframe.python"] == p.python


def _site_packages(rootfs: Path) -> set[str]:
    lib = rootfs / "opt/hyperframe/venv/lib"
    return {d.name.split("-")[0].lower() for sp in lib.glob("python*/site-packages") for d in sp.iterdir()}


def test_framework_image_has_the_runtime_and_not_the_operator_stack(
    built: Built, framework_rootfs: Path
) -> None:
    installed = _site_packages(framework_rootfs)
    assert {"torch", "hyperframe_runtime", "hyperframe", "numpy"} <= installed
    assert not installed & set(OPERATOR_EXTRA), (
        f"the operator's stack is in the framework image: {installed & set(OPERATOR_EXTRA)}"
    )
    for script in SCRIPTS:
        assert (framework_rootfs / "opt/hyperframe/venv/bin" / script).is_file(), script


def test_the_framework_image_runs_as_its_user_with_the_contract(
    built: Built, framework_rootfs: Path, tmp_path: Path
) -> None:
    m = built.matrix
    check = (
        "set -e; id -u; id -g; "
        f"for s in {' '.join(SCRIPTS)}; do command -v $s; done; "
        "python -c 'import torch, hyperframe_runtime; print(torch.__version__)'; "
        "hyperframe-smoke --help >/dev/null; echo smoke-help-ok; "
        "pip list --format=freeze"
    )
    result = _run_in_image(built, framework_rootfs, ["/bin/bash", "-c", check], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [str(m.image_user.uid), str(m.image_user.uid)]
    assert [line.rsplit("/", 1)[-1] for line in lines[2 : 2 + len(SCRIPTS)]] == list(SCRIPTS)
    assert built.profile.torch.local_version in lines
    assert "smoke-help-ok" in lines
    frozen = {line.split("==")[0].lower().replace("_", "-") for line in lines if "==" in line}
    assert "torch" in frozen and "hyperframe-runtime" in frozen
    assert not frozen & {"kopf", "kubernetes", "aiohttp", "prometheus-client"}


def test_a_rebuild_without_changes_reuses_every_layer(built: Built) -> None:
    first, second = built.layers
    assert first == second
    # Everything came from the cache, the image configs included: the very same manifests.
    before = json.loads((built.out.parent / "out1/digests.json").read_text(encoding="utf-8"))
    assert before == built.digests
    steps = [
        line
        for line in built.logs[1].splitlines()
        if line.startswith("#") and ("] RUN " in line or "] COPY " in line)
    ]
    assert steps, "no build step in the second build's log"
    done = "\n".join(built.logs[1].splitlines())
    for step in {s.split(" ", 1)[0] for s in steps}:
        assert f"{step} CACHED" in done, (
            f"step {step} was rebuilt: {[s for s in steps if s.startswith(step + ' ')]}"
        )
    print(
        f"make images: first build {built.seconds[0]:.0f} s, rebuild without changes {built.seconds[1]:.0f} s"
    )
