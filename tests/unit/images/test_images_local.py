"""What `make images` writes around the local build: the wheels the local profile's pip steps may
read, and the files the development cluster reads the pushed digests from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hyperframe.api.models import parse_runtime
from hyperframe.images.local import link_exactly, profile_requirements, write_cluster_files
from hyperframe.images.matrix import Matrix, Profile
from hyperframe.images.repo import load_matrix
from hyperframe_devcluster import paths

ROOT = Path(__file__).resolve().parents[3]
REGISTRY = "127.0.0.1:5999"


def _local() -> tuple[Matrix, Profile]:
    m = load_matrix(ROOT)
    return m, m.local_profiles[0]


def _metadata(m: Matrix, p: Profile) -> dict[str, dict[str, str]]:
    return {
        f"operator-{p.name}": {
            "containerimage.digest": "sha256:" + "a" * 64,
            "image.name": m.operator_image(REGISTRY, profile=p),
        },
        f"base-{p.name}": {
            "containerimage.digest": "sha256:" + "b" * 64,
            "image.name": m.base_image(p, REGISTRY),
        },
        f"framework-{p.name}": {
            "containerimage.digest": "sha256:" + "c" * 64,
            "image.name": m.framework_image(p, REGISTRY),
        },
    }


def test_the_wheels_cover_torch_both_packages_the_operator_extra_and_the_build_backend() -> None:
    _, p = _local()
    reqs = profile_requirements(ROOT, p)
    assert reqs[0] == f"torch=={p.torch.version}"
    names = {r.split(">")[0].split("=")[0].split("<")[0] for r in reqs}
    assert {"kopf", "kubernetes", "jinja2", "pyyaml", "numpy", "setuptools"} <= names
    assert not {"hyperframe", "hyperframe-runtime"} & names


def test_cluster_files_pin_the_pushed_digests(tmp_path: Path) -> None:
    m, p = _local()
    written = write_cluster_files(ROOT, m, p, REGISTRY, json.dumps(_metadata(m, p)), tmp_path)
    assert {w.name for w in written} == {"digests.json", "values-local.yaml", "runtimes-local.yaml"}
    digests = json.loads((tmp_path / "digests.json").read_text())
    assert digests == {
        "hyperframe-operator": f"{REGISTRY}/hyperframe-operator@sha256:{'a' * 64}",
        "hyperframe-base": f"{REGISTRY}/hyperframe-base@sha256:{'b' * 64}",
        "hyperframe-framework": f"{REGISTRY}/hyperframe-framework@sha256:{'c' * 64}",
    }
    runtimes = {
        d["metadata"]["name"]: d
        for d in yaml.safe_load_all((tmp_path / "runtimes-local.yaml").read_text())
        if d
    }
    assert set(runtimes) == {p.name, "example-cpu"}
    for doc in runtimes.values():
        runtime = parse_runtime(doc)
        assert runtime.spec.images.framework == f"{m.framework_image(p, REGISTRY)}@sha256:{'c' * 64}"
        assert runtime.spec.versions.torch == p.torch.local_version
    values = yaml.safe_load((tmp_path / "values-local.yaml").read_text())
    assert values["image"] == {
        "repository": f"{REGISTRY}/hyperframe-operator",
        "tag": m.operator_tag(p),
        "digest": "sha256:" + "a" * 64,
    }
    assert values["runtimes"]["exclude"] == [q.name for q in m.released_profiles]
    assert values["runtimes"]["profiles"][p.name]["images"]["base"].endswith("@sha256:" + "b" * 64)
    rendered = subprocess.run(
        [sys.executable, "-m", "hyperframe.cli", "render", "examples/cpu-tiny.yaml", "--runtime",
         str(tmp_path / "runtimes-local.yaml")],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    assert f"{m.framework_image(p, REGISTRY)}@sha256:{'c' * 64}" in rendered.stdout
    assert "sha256:" + "0" * 64 not in rendered.stdout


def test_a_missing_push_is_named(tmp_path: Path) -> None:
    m, p = _local()
    metadata = _metadata(m, p)
    del metadata[f"framework-{p.name}"]
    with pytest.raises(KeyError, match="was not pushed"):
        write_cluster_files(ROOT, m, p, REGISTRY, json.dumps(metadata), tmp_path)


def test_the_chart_installs_the_pushed_images_with_values_local(tmp_path: Path) -> None:
    """`helm install -f values-local.yaml`: the operator by digest and only the local runtime."""
    m, p = _local()
    write_cluster_files(ROOT, m, p, REGISTRY, json.dumps(_metadata(m, p)), tmp_path)
    result = subprocess.run(
        [str(paths.helm()), "template", "hf", str(ROOT / "charts/hyperframe-operator"), "-f",
         str(tmp_path / "values-local.yaml")],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    objects = [d for d in yaml.safe_load_all(result.stdout) if d]
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    images = {c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert images == {f"{REGISTRY}/hyperframe-operator@sha256:{'a' * 64}"}
    runtimes = [o for o in objects if o["kind"] == "HyperFrameRuntime"]
    assert [r["metadata"]["name"] for r in runtimes] == [p.name]
    assert runtimes[0]["spec"]["images"]["framework"] == f"{m.framework_image(p, REGISTRY)}@sha256:{'c' * 64}"
    assert "sha256:" + "0" * 64 not in result.stdout


def test_staged_wheels_are_updated_in_place(tmp_path: Path) -> None:
    source, out = tmp_path / "wheelhouse", tmp_path / "staged"
    source.mkdir()
    for name in ("a.whl", "b.whl", "c.whl"):
        (source / name).write_text(name)
    link_exactly(["a.whl", "b.whl"], source, out)
    kept = (out / "a.whl").stat()
    (out / "stray.whl").write_text("old")
    link_exactly(["a.whl", "c.whl"], source, out)
    assert sorted(p.name for p in out.iterdir()) == ["a.whl", "c.whl"]
    assert (out / "c.whl").samefile(source / "c.whl")
    # Untouched, so BuildKit sees the same file and does not send it again.
    assert (out / "a.whl").stat().st_ctime_ns == kept.st_ctime_ns
