"""`make images` (images/build.sh) before it builds anything: it refuses stale generated files, says
why where no engine can run (exit 3, or 1 with CI=true) and asks for the registry it pushes to.
The build itself is tested on real images in tests/integration/test_built_images.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hyperframe_devcluster.paths import pins

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
TOOLS = ("buildkitd", "buildctl", "buildx")


def _repo_copy(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for rel in COPIED:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, repo / rel)
    return repo


def _fake_tools(tmp_path: Path) -> Path:
    """A binary cache holding stand-ins for the pinned BuildKit tools (they must never run)."""
    cache = tmp_path / "bin-cache"
    cache.mkdir()
    for name in TOOLS:
        tool = cache / f"{name}-{pins().version_of(name)}"
        tool.write_text("#!/bin/sh\necho must not run >&2\nexit 99\n", encoding="utf-8")
        tool.chmod(0o755)
    return cache


def _run(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHON": sys.executable, **env}
    for name in ("CI", "HYPERFRAME_REGISTRY", "REGISTRY"):
        if name not in env:
            full.pop(name, None)
    return subprocess.run(
        ["bash", str(repo / "images/build.sh"), *args], capture_output=True, text=True, env=full, check=False
    )


def _root_problem() -> str | None:
    return None if os.geteuid() == 0 else "buildkitd runs as root here"


def test_stale_generated_files_stop_the_build(tmp_path: Path) -> None:
    repo = _repo_copy(tmp_path)
    bake = repo / "docker-bake.hcl"
    bake.write_text(bake.read_text(encoding="utf-8") + "// hand edit\n", encoding="utf-8")
    result = _run(repo)
    assert result.returncode == 2
    assert "make generate" in result.stderr


@pytest.mark.parametrize(("ci", "code"), [("", 3), ("true", 1)])
def test_without_runc_it_explains_and_exits_3_or_fails_in_ci(tmp_path: Path, ci: str, code: int) -> None:
    repo = _repo_copy(tmp_path)
    # A PATH with what the script needs before the engine checks, and no runc.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("bash", "dirname", "id", "sed"):
        found = shutil.which(name)
        assert found is not None, name
        (bin_dir / name).symlink_to(found)
    result = _run(repo, PATH=str(bin_dir), CI=ci)
    assert result.returncode == code, result.stderr
    assert "cannot build images here" in result.stderr
    assert (_root_problem() or "runc is not installed") in result.stderr
    assert ("CI=true" in result.stderr) == (ci == "true")


def test_without_the_buildkit_tools_it_names_the_fix(tmp_path: Path) -> None:
    repo = _repo_copy(tmp_path)
    if shutil.which("runc") is None:
        pytest.fail("runc is needed on the machines that run the tests (apt-get install runc)")
    result = _run(repo, HYPERFRAME_BIN_CACHE=str(tmp_path / "empty"))
    assert result.returncode == 3, result.stderr
    assert (_root_problem() or "buildkitd v") in result.stderr
    if _root_problem() is None:
        assert "make cluster-build" in result.stderr


def test_it_asks_for_the_registry_before_starting_an_engine(tmp_path: Path) -> None:
    repo = _repo_copy(tmp_path)
    if shutil.which("runc") is None or shutil.which("debootstrap") is None:
        pytest.fail("runc and debootstrap are needed on the machines that run the tests")
    cache = _fake_tools(tmp_path)
    unset = _run(repo, HYPERFRAME_BIN_CACHE=str(cache))
    silent = _run(repo, HYPERFRAME_BIN_CACHE=str(cache), HYPERFRAME_REGISTRY="127.0.0.1:9")
    if _root_problem() is not None:
        assert unset.returncode == silent.returncode == 3
        return
    assert unset.returncode == 2 and "HYPERFRAME_REGISTRY is not set" in unset.stderr
    assert silent.returncode == 2 and "no registry answers at http://127.0.0.1:9/v2/" in silent.stderr
    assert "must not run" not in unset.stderr + silent.stderr


def test_a_release_push_goes_to_the_matrix_registry_only(tmp_path: Path) -> None:
    repo = _repo_copy(tmp_path)
    result = _run(repo, "--push", HYPERFRAME_BIN_CACHE=str(_fake_tools(tmp_path)), REGISTRY="example.com/x")
    if _root_problem() is not None or shutil.which("runc") is None:
        assert result.returncode == 3
        return
    assert result.returncode == 2
    assert "change registry: in images/matrix.yaml instead of REGISTRY" in result.stderr
    assert "must not run" not in result.stderr
