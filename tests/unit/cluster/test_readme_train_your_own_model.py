"""The README's "Train your own model" against the files it names, so the doc cannot drift.

tests/e2e/test_user_image.py runs the section's ```sh blocks as written (read with
`hyperframe_devcluster.doc_blocks.section_blocks`) on the real node; here, without a cluster:
the blocks are what that test expects (the image build that sets $IMAGE first), every block is
valid bash, the runtime, volume directory, claim, namespace, job name and metrics directory they
name are those of examples/user-project, and the README's own `sed` turns job-hf.yaml into that
job alone with the image set.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hyperframe_devcluster import demo, paths
from hyperframe_devcluster.doc_blocks import DocSectionError, section_blocks

REPO = paths.repo_root()
PROJECT = REPO / "examples" / "user-project"
SECTION = "Train your own model"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((PROJECT / name).read_text()) if d]


def _of(kind: str, name: str) -> dict[str, Any]:
    return next(d for d in _docs(name) if d["kind"] == kind)


@pytest.fixture(scope="module")
def blocks() -> list[str]:
    return section_blocks(REPO / "README.md", SECTION)


def test_section_blocks_reads_the_sh_blocks_of_one_section_and_its_subsections(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Top\n```sh\nbefore\n```\n## Wanted\ntext\n```sh\none\n```\n```yaml\nk: v\n```\n"
        "### Sub\n```sh\ntwo \\\n  more\n```\n## Next\n```sh\nafter\n```\n"
    )
    assert section_blocks(doc, "Wanted") == ["one\n", "two \\\n  more\n"]
    assert section_blocks(doc, "Sub") == ["two \\\n  more\n"]
    assert section_blocks(doc, "Wanted", language="yaml") == ["k: v\n"]
    with pytest.raises(DocSectionError, match="no section titled 'Missing'"):
        section_blocks(doc, "Missing")
    with pytest.raises(DocSectionError, match="has no ```python block"):
        section_blocks(doc, "Next", language="python")


def test_every_block_is_valid_bash_and_the_first_sets_image_from_the_image_build(blocks: list[str]) -> None:
    assert len(blocks) == 3, blocks
    for block in blocks:
        checked = subprocess.run(["bash", "-n", "-c", block], capture_output=True, text=True, check=False)
        assert checked.returncode == 0, checked.stderr
    build = blocks[0].replace("\\\n", " ")
    assert 'eval "$(.venv/bin/python -m hyperframe_devcluster env)"' in build
    match = re.search(
        r"^IMAGE=\$\(\.venv/bin/hyperframe image build (\S+) --from (\S+) ", build, re.MULTILINE
    )
    assert match, build
    job, runtime = _of("HyperFrameJob", "job-hf.yaml"), _of("HyperFrameRuntime", "job-hf.yaml")
    assert REPO / match.group(1) == PROJECT
    assert match.group(2) == job["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]
    assert "image" in runtime["spec"]["allowedOverrides"]
    assert '--tag "$HYPERFRAME_REGISTRY/ml/user-project"' in build  # under the e2e runtime's prefix


def test_the_volume_claim_namespace_and_files_are_those_of_the_example(blocks: list[str]) -> None:
    volume, claim = _of("PersistentVolume", "volume.yaml"), _of("PersistentVolumeClaim", "volume.yaml")
    namespace = _of("Namespace", "volume.yaml")["metadata"]["name"]
    host = volume["spec"]["hostPath"]["path"]
    assert volume["spec"]["claimRef"] == {"namespace": namespace, "name": claim["metadata"]["name"]}
    assert (
        claim["metadata"]["namespace"] == namespace
        and claim["spec"]["volumeName"] == volume["metadata"]["name"]
    )
    data = blocks[1]
    assert f"install -d -o {demo.IMAGE_USER_UID} -g {demo.IMAGE_USER_UID} {host}\n" in data
    assert "kubectl apply -f examples/user-project/volume.yaml\n" in data
    prepare = re.search(r"^\.venv/bin/hyperframe data prepare (.+) -o (\S+)$", data, re.MULTILINE)
    assert prepare, data
    assert all(list(REPO.glob(pattern)) for pattern in prepare.group(1).split())

    job = _of("HyperFrameJob", "job-hf.yaml")
    spec = job["spec"]
    [mount] = [m for m in spec["volumeMounts"] if m["name"] == "data"]
    [source] = [v for v in spec["volumes"] if v["name"] == "data"]
    assert source["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    # The shards the README writes are where the job reads them, the claim mounted at mountPath.
    assert prepare.group(2) == host + spec["data"]["shards"].removeprefix(mount["mountPath"])
    assert spec["frames"]["checkpoint"]["volume"] == "data" and not mount.get("readOnly")

    name = job["metadata"]["name"]
    run = blocks[2]
    assert f"| kubectl apply -n {namespace} -f -\n" in run
    assert f"kubectl -n {namespace} wait hfj/{name} --for=jsonpath='{{.status.phase}}'=Succeeded" in run
    assert f"kubectl -n {namespace} get hfj {name}\n" in run
    listed = re.search(r"^ls (\S+)", run, re.MULTILINE)
    assert listed, run
    assert listed.group(1) == host + _metrics_dir().removeprefix(mount["mountPath"])


def _metrics_dir() -> str:
    """frames.metricsDir of the job as the operator renders it (job.json in its ConfigMap)."""
    rendered = subprocess.run(
        [sys.executable, "-m", "hyperframe.cli", "render", str(PROJECT / "job-hf.yaml"), "-n", "ml"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    config = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "ConfigMap")
    return str(json.loads(config["data"]["job.json"])["frames"]["metricsDir"])


def test_the_readmes_sed_applies_job_hf_yamls_job_alone_with_the_image(
    blocks: list[str], tmp_path: Path
) -> None:
    line = next(cmd for cmd in blocks[2].splitlines() if cmd.startswith("sed "))
    produce = line.split(" | kubectl ", 1)[0]
    image = "127.0.0.1:5000/ml/user-project@sha256:" + "ab" * 32
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", produce],
        cwd=REPO,
        env={"IMAGE": image, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    applied = [d for d in yaml.safe_load_all(out) if d]
    expected = _of("HyperFrameJob", "job-hf.yaml")
    expected["spec"]["image"] = image
    assert applied == [expected]
