"""`hyperframe render` and the `hyperframe local` entry, run in-process through main()."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from api_helpers import EXAMPLES, example_docs, example_files
from hyperframe.cli import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("example", example_files())
def test_render_prints_multi_document_yaml(example: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["render", str(EXAMPLES / example)], capsys)
    assert code == 0, err
    docs = list(yaml.safe_load_all(out))
    assert out.startswith("---\n")
    assert [d["kind"] for d in docs][:2] == ["Service", "ConfigMap"]
    job = next(d for d in example_docs(example) if d["kind"] == "HyperFrameJob")
    assert sum(d["kind"] == "Pod" for d in docs) == job["spec"]["nodes"]


def test_runtime_from_a_separate_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = example_docs("cpu-2node.yaml")
    job_file, rt_file = tmp_path / "job.yaml", tmp_path / "rt.yaml"
    job_file.write_text(yaml.safe_dump(docs[1]))
    rt_file.write_text(yaml.safe_dump(docs[0]))
    code, out, _ = run(["render", str(job_file), "--runtime", str(rt_file)], capsys)
    assert code == 0 and "cpu-2node-g0-1" in out
    code, _, err = run(["render", str(job_file)], capsys)
    assert code == 1
    assert 'spec.runtimeRef.name: HyperFrameRuntime "example-cpu" is not among the given documents' in err


def test_generation_and_excluded_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["render", str(EXAMPLES / "cpu-2node.yaml"), "--generation", "4", "--exclude-node", "node-a"]
    code, out, _ = run(argv, capsys)
    pods = [d for d in yaml.safe_load_all(out) if d["kind"] == "Pod"]
    assert code == 0 and [p["metadata"]["name"] for p in pods] == ["cpu-2node-g4-0", "cpu-2node-g4-1"]
    assert "node-a" in str(pods[0]["spec"]["affinity"])
    code, _, err = run(["render", str(EXAMPLES / "cpu-2node.yaml"), "--generation", "-1"], capsys)
    assert code == 2 and "--generation" in err


def _bad(tmp_path: Path, patch: dict[str, Any]) -> Path:
    docs = example_docs("cpu-2node.yaml")
    docs[1]["spec"].update(patch)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_bad_job_exits_non_zero_with_one_line_per_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _bad(
        tmp_path,
        {"nodes": 0, "parallelism": {"pipeline": 2, "data": 3}, "env": [{"name": "RANK", "value": "1"}]},
    )
    code, out, err = run(["render", str(path)], capsys)
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0] == f"error: cannot render {path}:"
    assert any(line.strip().startswith("spec.nodes: 0 is below the minimum 1: ") for line in lines)
    assert any(line.strip().startswith("spec.env[0].name: RANK is reserved") for line in lines)


def test_unreadable_and_malformed_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["render", str(tmp_path / "missing.yaml")], capsys)
    assert code == 1 and "cannot read the file" in err
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [unclosed\n")
    code, _, err = run(["render", str(broken)], capsys)
    assert code == 1 and "not valid YAML" in err
    no_job = tmp_path / "nojob.yaml"
    no_job.write_text(yaml.safe_dump(example_docs("cpu-tiny.yaml")[0]))
    code, _, err = run(["render", str(no_job)], capsys)
    assert code == 1 and "found 0 HyperFrameJob documents" in err


def test_local_without_the_runtime_package_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "hyperframe_runtime.local", None)  # import fails like a missing package
    code, _, err = run(["local", "examples/cpu-tiny.yaml"], capsys)
    assert code == 2
    assert "install it: pip install hyperframe-runtime" in err


def test_local_delegates_its_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    class FakeLocal:
        @staticmethod
        def main(argv: list[str]) -> int:
            seen.append(argv)
            return 7

    monkeypatch.setitem(sys.modules, "hyperframe_runtime.local", FakeLocal)
    assert main(["local", "job.yaml", "--frames", "2"]) == 7
    assert seen == [["job.yaml", "--frames", "2"]]


def test_console_script_entry_point() -> None:
    exe = Path(sys.executable).with_name("hyperframe")
    result = subprocess.run(
        [str(exe), "render", str(EXAMPLES / "cpu-tiny.yaml")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "kind: Pod" in result.stdout


def test_namespace_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["render", str(EXAMPLES / "cpu-tiny.yaml"), "-n", "ml-team"], capsys)
    docs = list(yaml.safe_load_all(out))
    assert code == 0 and {d["metadata"]["namespace"] for d in docs} == {"ml-team"}
    assert "cpu-tiny-0.cpu-tiny.ml-team.svc" in out
    docs = example_docs("cpu-tiny.yaml")
    docs[1]["metadata"]["namespace"] = "other"
    path = tmp_path / "ns.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code, _, err = run(["render", str(path), "--namespace", "ml-team"], capsys)
    assert code == 1 and 'metadata.namespace: is "other" but --namespace is "ml-team"' in err
