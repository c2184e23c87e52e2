"""The framework image's Python layer, tested without a Docker engine.

images/install-framework.sh, the script Dockerfile.framework runs, installs the runtime phase by
phase (wheels, torch, deps, app, verify) with the pins of the matrix's PyPI-served profile into
a fresh virtualenv. Then the image's entrypoint (`hyperframe-launch --help`), the gate's
`--help`, and the CPU smoke gate of the cpu-tiny example (whose runtime carries the images and
versions of the generated `cpu` profile) run from that virtualenv's console scripts, as the
containers would run them.

What differs from the image, and why:
- pip reads packages from the wheelhouse `make venv` fills (PIP_NO_INDEX + PIP_FIND_LINKS, pip's
  own configuration, not a change to the script): the registry sends no cacheable responses, so
  without it every CI run would download 2.6 GiB again;
- the interpreter is this machine's Python, so HF_PYTHON_VERSION is set to it instead of the
  profile's;
- the wheels are built with this venv's setuptools (HF_BUILD_ISOLATION=0), as pip could not fetch
  an isolated build environment offline.
No cluster is needed; the test is slow (about three minutes, most of it unpacking torch).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from hyperframe.constants import SmokeExit
from hyperframe.images.matrix import Profile
from hyperframe.images.repo import RUNTIMES_FILE, load_matrix
from hyperframe.render import render_job
from hyperframe.smoke_report import SmokeReport
from hyperframe_runtime.local_plan import localize, plan

# About three minutes on an idle CI-size machine; the limit leaves room for a loaded one (the
# module fixture's install counts against the first test).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "images/install-framework.sh"
WHEELHOUSE = Path(os.environ.get("HYPERFRAME_WHEELHOUSE", Path.home() / ".cache/hyperframe/wheels"))
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True)
class Framework:
    venv: Path
    env: dict[str, str]
    profile: Profile

    def run(self, *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(SCRIPT), *args],
            env={**self.env, **(extra or {})},
            capture_output=True,
            text=True,
            check=False,
            timeout=2000,
        )


def _pypi_profile() -> Profile:
    m = load_matrix(ROOT)
    return next(p for p in m.profiles if p.torch.index_url == "https://pypi.org/simple")


def _clean_env(venv: Path) -> dict[str, str]:
    """No trace of the project's .venv: the console scripts must work from the new venv alone."""
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "LC_ALL", "TMPDIR", "USER")}
    return {**keep, "PATH": f"{venv / 'bin'}{os.pathsep}/usr/local/bin:/usr/bin:/bin"}


@pytest.fixture(scope="module")
def framework(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Framework]:
    profile = _pypi_profile()
    if not any(WHEELHOUSE.glob(f"torch-{profile.torch.version}-*.whl")):
        pytest.fail(
            f"no torch {profile.torch.version} wheel in {WHEELHOUSE}: run `make venv`, which fills it"
        )
    work = tmp_path_factory.mktemp("framework")
    # What the Dockerfile's builder stage COPYs: the two pyprojects and their sources, no build dirs.
    src = work / "src"
    for dist in ("operator", "runtime"):
        (src / dist).mkdir(parents=True)
        shutil.copy2(ROOT / dist / "pyproject.toml", src / dist / "pyproject.toml")
        ignore = shutil.ignore_patterns("*.egg-info", "__pycache__")
        shutil.copytree(ROOT / dist / "src", src / dist / "src", ignore=ignore)
    venv = work / "opt/hyperframe/venv"
    env = {
        **_clean_env(venv),
        "HF_VENV": str(venv),
        "HF_PYTHON": sys.executable,
        "HF_BUILD_PYTHON": sys.executable,
        "HF_BUILD_ISOLATION": "0",
        "HF_PYTHON_VERSION": PYTHON,
        "HF_TORCH_VERSION": profile.torch.version,
        "HF_TORCH_VARIANT": profile.torch.variant,
        "HF_TORCH_CUDA": profile.torch.cuda or "none",
        "HF_TORCH_INDEX_URL": profile.torch.index_url,
        "HF_NCCL_VERSION": profile.torch.nccl or "none",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(WHEELHOUSE),
    }
    fw = Framework(venv=venv, env=env, profile=profile)
    wheels = work / "wheels"
    for phase in (("wheels", str(src), str(wheels)), ("torch",), ("deps", str(wheels)), ("app", str(wheels))):
        result = fw.run(*phase)
        assert result.returncode == 0, (
            f"install-framework {phase[0]} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    yield fw
    # 4.9 GiB: do not leave it to pytest's retention of the last three temporary directories.
    shutil.rmtree(work, ignore_errors=True)


def test_the_layer_holds_the_pinned_torch_and_the_runtime_wheels(framework: Framework) -> None:
    result = framework.run("verify")
    assert result.returncode == 0, result.stderr
    assert (
        f"torch {framework.profile.torch.local_version}, CUDA {framework.profile.torch.cuda}" in result.stdout
    )
    freeze = (framework.venv.parent / "pip-freeze.txt").read_text(encoding="utf-8")
    assert f"torch=={framework.profile.torch.version}" in freeze.splitlines()
    assert f"nvidia-nccl-cu13=={framework.profile.torch.nccl}" in freeze.splitlines()
    # The runtime comes from its wheel inside the venv, not from the repository checkout.
    where = subprocess.run(
        [str(framework.venv / "bin/python"), "-c", "import hyperframe_runtime, hyperframe; print(hyperframe_runtime.__file__, hyperframe.__file__)"],
        capture_output=True, text=True, check=True, env=_clean_env(framework.venv),
    ).stdout  # fmt: skip
    assert all(path.startswith(str(framework.venv)) for path in where.split())


def test_verify_rejects_a_torch_of_another_cuda_variant_or_nccl(framework: Framework) -> None:
    result = framework.run(
        "verify", extra={"HF_TORCH_VARIANT": "cu129", "HF_TORCH_CUDA": "12.9", "HF_NCCL_VERSION": "2.28.9"}
    )
    assert result.returncode == 1
    assert (
        f"torch: installed {framework.profile.torch.local_version}, the pin matrix says 2.13.0+cu129"
        in result.stderr
    )
    assert (
        f"torch.cuda: torch is built for CUDA {framework.profile.torch.cuda}, the pin matrix says 12.9"
        in result.stderr
    )
    assert (
        f"torch.nccl: torch loads NCCL {framework.profile.torch.nccl}, the pin matrix says 2.28.9"
        in result.stderr
    )


def test_the_entrypoint_and_the_gate_answer_help(framework: Framework) -> None:
    for script in ("hyperframe-launch", "hyperframe-smoke"):
        result = subprocess.run(
            [str(framework.venv / "bin" / script), "--help"],
            capture_output=True, text=True, check=False, env=_clean_env(framework.venv), timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, f"{script} --help: {result.stdout}{result.stderr}"
        assert f"usage: {script}" in result.stdout


def test_the_cpu_smoke_gate_passes_from_the_installed_layer(framework: Framework, tmp_path: Path) -> None:
    docs = [d for d in yaml.safe_load_all((ROOT / "examples/cpu-tiny.yaml").read_text(encoding="utf-8")) if d]
    job = next(d for d in docs if d["kind"] == "HyperFrameJob")
    runtime = next(d for d in docs if d["kind"] == "HyperFrameRuntime")
    # The example's runtime names the generated `cpu` profile and carries its images and versions.
    generated = next(
        d
        for d in yaml.safe_load_all((ROOT / RUNTIMES_FILE).read_text(encoding="utf-8"))
        if d and d["metadata"]["name"] == "cpu"
    )
    assert runtime["metadata"]["labels"]["hyperframe.dev/pin-matrix-profile"] == "cpu"
    assert runtime["spec"]["images"] == generated["spec"]["images"]
    assert runtime["spec"]["versions"] == generated["spec"]["versions"]
    local = plan(render_job(job, runtime))
    config = tmp_path / "job.json"
    config.write_text(local.job_json, encoding="utf-8")
    assert len(local.nodes) == 1, "cpu-tiny is a one-node job"
    gate = local.nodes[0].gate
    assert gate is not None and gate.module == "hyperframe_runtime.smoke.cli"
    command = localize(gate, port=_free_port(), config_path=str(config))
    log = tmp_path / "termination-log"
    result = subprocess.run(
        [str(framework.venv / "bin/hyperframe-smoke"), *command.args, "--termination-log", str(log)],
        env={**_clean_env(framework.venv), **command.env},
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert result.returncode == int(SmokeExit.PASS), result.stdout + result.stderr
    report = SmokeReport.from_termination_message(log.read_text(encoding="utf-8"))
    assert report.ok and report.exit_code == int(SmokeExit.PASS)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
