"""`make images` (images/build.sh): it says clearly that it cannot build where no Docker engine
answers, and where one does it builds the bake file's targets and records pushed digests. The
engine is a stand-in `docker` script on PATH, so the real command lines are checked anywhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from hyperframe.images.repo import load_matrix

ROOT = Path(__file__).resolve().parents[3]
COPIED = (
    "images/build.sh",
    "images/matrix.yaml",
    "images/published.yaml",
    "images/generated/runtimes.yaml",
    "docker-bake.hcl",
    "docs/images.md",
    "operator/pyproject.toml",
    "runtime/pyproject.toml",
)

FAKE_DOCKER = """#!/usr/bin/env bash
echo "$*" >>"$FAKE_DOCKER_LOG"
case "$1" in
  info) [[ "$FAKE_ENGINE" == up ]] && exit 0; echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock." >&2; exit 1 ;;
  buildx)
    if [[ "$2 $3" == "bake --file" ]]; then
      for ((i = 1; i <= $#; i++)); do
        if [[ "${!i}" == --metadata-file ]]; then j=$((i + 1)); cp "$FAKE_METADATA" "${!j}"; fi
      done
    fi
    exit 0 ;;
esac
"""


def _repo_copy(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for rel in COPIED:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, repo / rel)
    return repo


def _run(
    repo: Path, tmp_path: Path, *args: str, engine: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER, encoding="utf-8")
    docker.chmod(0o755)
    log = tmp_path / "docker.log"
    log.write_text("", encoding="utf-8")
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHON": sys.executable,
        "FAKE_ENGINE": engine,
        "FAKE_DOCKER_LOG": str(log),
        "FAKE_METADATA": str(tmp_path / "metadata.json"),
    }
    env.pop("REGISTRY", None)
    result = subprocess.run(
        ["bash", str(repo / "images/build.sh"), *args], capture_output=True, text=True, env=env, check=False
    )
    return result, log.read_text(encoding="utf-8").splitlines()


def test_without_an_engine_it_explains_and_exits_3(tmp_path: Path) -> None:
    repo = _repo_copy(tmp_path)
    result, calls = _run(repo, tmp_path, engine="down")
    assert result.returncode == 3
    assert "cannot build images here" in result.stderr
    assert "no Docker engine answers" in result.stderr
    assert "Cannot connect to the Docker daemon" in result.stderr
    assert not any(c.startswith("buildx bake") for c in calls)


def test_with_an_engine_it_bakes_the_requested_targets(tmp_path: Path) -> None:
    repo = _repo_copy(tmp_path)
    result, calls = _run(repo, tmp_path, "framework-cpu", engine="up")
    assert result.returncode == 0, result.stderr
    assert "buildx bake --file docker-bake.hcl --load framework-cpu" in calls


def test_stale_generated_files_stop_the_build(tmp_path: Path) -> None:
    repo = _repo_copy(tmp_path)
    bake = repo / "docker-bake.hcl"
    bake.write_text(bake.read_text(encoding="utf-8") + "// hand edit\n", encoding="utf-8")
    result, calls = _run(repo, tmp_path, engine="up")
    assert result.returncode == 2
    assert "make generate" in result.stderr and calls == []


def test_push_records_the_digests_and_pins_the_runtimes(tmp_path: Path) -> None:
    repo = _repo_copy(tmp_path)
    m = load_matrix(repo)
    p = m.profile("cpu")
    digest = "sha256:" + "c" * 64
    metadata = {
        "base-cpu": {"containerimage.digest": "sha256:" + "d" * 64, "image.name": m.base_image(p)},
        "framework-cpu": {"containerimage.digest": digest, "image.name": m.framework_image(p)},
    }
    (tmp_path / "metadata.json").write_text(json.dumps(metadata), encoding="utf-8")
    result, calls = _run(repo, tmp_path, "--push", "framework-cpu", engine="up")
    assert result.returncode == 0, result.stderr
    assert any(c.startswith("buildx bake --file docker-bake.hcl --push --metadata-file ") for c in calls)
    published = yaml.safe_load((repo / "images/published.yaml").read_text(encoding="utf-8"))["images"]
    assert published[m.framework_image(p)] == digest
    runtimes = {
        d["metadata"]["name"]: d
        for d in yaml.safe_load_all((repo / "images/generated/runtimes.yaml").read_text())
        if d
    }
    assert runtimes["cpu"]["spec"]["images"]["framework"] == f"{m.framework_image(p)}@{digest}"
    assert runtimes["cpu"]["metadata"]["annotations"]["hyperframe.dev/images-published"] == "true"
