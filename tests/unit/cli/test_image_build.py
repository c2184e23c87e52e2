"""`hyperframe image build DIR --from RUNTIME`: the Dockerfile, the tag, the runtime's admission.

The build itself runs images/build.sh --user-image on the real node (tests/e2e/test_user_image.py);
here everything it decides before the engine starts, and the script's refusal of bad usage.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from api_helpers import EXAMPLES, ROOT, example_pair, patched
from hyperframe.api.models import parse_runtime
from hyperframe.cli import main
from hyperframe.user_image import admission_problem, dockerfile, plan_image

PROJECT = EXAMPLES / "user-project"
RUNTIME_FILE = PROJECT / "job.yaml"
RUNTIME = "example-cpu-user-images"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_dockerfile_is_the_runtime_s_framework_image_plus_the_project(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["image", "build", str(PROJECT), "--from", RUNTIME, "--runtime", str(RUNTIME_FILE)]
    code, out, err = run(
        [*argv, "--tag", "registry.example.com/ml/user-project", "--print-dockerfile"], capsys
    )
    assert code == 0, err
    _, runtime = example_pair("user-project/job.yaml")
    lines = out.splitlines()
    assert f"FROM {runtime['spec']['images']['framework']}" in lines
    assert lines[-3:] == ["WORKDIR /workspace", "COPY . /workspace", "ENV PYTHONPATH=/workspace"]
    assert out == dockerfile(runtime["spec"]["images"]["framework"])


def test_the_tag_defaults_to_the_registry_and_the_directory_name(monkeypatch: pytest.MonkeyPatch) -> None:
    _, runtime = example_pair("user-project/job.yaml")
    image = plan_image(PROJECT, parse_runtime(runtime), None, {"HYPERFRAME_REGISTRY": "127.0.0.1:5000"})
    assert image.name == "127.0.0.1:5000/user-project"


def test_without_a_tag_or_registry_it_says_how_to_name_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HYPERFRAME_REGISTRY", raising=False)
    argv = [
        "image",
        "build",
        str(PROJECT),
        "--from",
        RUNTIME,
        "--runtime",
        str(RUNTIME_FILE),
        "--print-dockerfile",
    ]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert "--tag: not given, and HYPERFRAME_REGISTRY is not set: pass --tag" in err


@pytest.mark.parametrize("tag", ["registry.example.com/ml/x@sha256:" + "0" * 64, "Registry/Upper", "/abs"])
def test_a_tag_that_is_not_a_push_target_is_refused(tag: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["image", "build", str(PROJECT), "--from", RUNTIME, "--runtime", str(RUNTIME_FILE), "--tag", tag]
    code, _, err = run([*argv, "--print-dockerfile"], capsys)
    assert code == 2 and "is not an image name to push to" in err


def test_an_unknown_runtime_or_directory_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(
        ["image", "build", str(PROJECT), "--from", "nope", "--runtime", str(RUNTIME_FILE)], capsys
    )
    assert code == 2 and f'--from: HyperFrameRuntime "nope" is not in {RUNTIME_FILE}' in err
    missing = tmp_path / "missing"
    argv = ["image", "build", str(missing), "--from", RUNTIME, "--runtime", str(RUNTIME_FILE), "--tag", "r/x"]
    code, _, err = run(argv, capsys)
    assert code == 2 and f"{missing}: is not a directory" in err


def test_admission_is_what_the_operator_will_decide() -> None:
    _, runtime = example_pair("user-project/job.yaml")
    digest = "@sha256:" + "0" * 64
    rt = parse_runtime(runtime)
    assert admission_problem("registry.example.com/ml/user-project" + digest, rt) is None
    outside = admission_problem("127.0.0.1:5000/user-project" + digest, rt)
    assert outside is not None and "is not under an allowed prefix" in outside
    closed = parse_runtime(patched(runtime, {"spec": {"allowedOverrides": ["shmSize"]}}))
    problem = admission_problem("registry.example.com/ml/user-project" + digest, closed)
    assert problem is not None and "does not allow jobs their own image" in problem


def test_build_sh_user_image_refuses_bad_usage_before_starting_an_engine(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", "images/build.sh", "--user-image", str(PROJECT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "expected CONTEXT DOCKERFILE NAME, got 1 argument(s)" in done.stderr
    done = subprocess.run(
        ["bash", "images/build.sh", "--user-image", str(PROJECT), str(tmp_path / "Dockerfile"), "r/x"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "Dockerfile is not a file" in done.stderr
