"""Files generated from the pin matrix: they are up to date (regenerated and diffed), the default
runtime profiles validate against the HyperFrameRuntime API, and every Dockerfile ARG is fed by
the bake file (and nothing else is)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from hyperframe.api.models import parse_runtime
from hyperframe.images.generate import (
    ANNOTATION_PUBLISHED,
    DOCS_BEGIN,
    DOCS_END,
    bake_args,
    expected_files,
    render_bake,
    render_runtimes,
    splice_docs,
    stale_files,
    write_files,
)
from hyperframe.images.matrix import DebootstrapBase
from hyperframe.images.published import (
    UNPUBLISHED_DIGEST,
    digests_from_bake_metadata,
    load_published,
    render_published,
)
from hyperframe.images.repo import BAKE_FILE, DOCS_FILE, RUNTIMES_FILE, load_matrix
from hyperframe.images.validate import MatrixError

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILES = {
    "operator": ROOT / "images/operator.Dockerfile",
    "base": ROOT / "Dockerfile.base",
    "framework": ROOT / "Dockerfile.framework",
}


def test_generated_files_are_up_to_date() -> None:
    m = load_matrix(ROOT)
    published = load_published(ROOT)
    expected = expected_files(ROOT, m, published)
    assert set(expected) == {BAKE_FILE, RUNTIMES_FILE, DOCS_FILE}
    stale = stale_files(ROOT, m, published)
    assert stale == [], f"stale generated files {stale}: run `make generate` and commit"


def test_a_changed_matrix_makes_the_generated_files_stale_and_generate_fixes_it(tmp_path: Path) -> None:
    for rel in ("images/matrix.yaml", "images/published.yaml", "operator/pyproject.toml", "runtime/pyproject.toml",
                str(BAKE_FILE), str(RUNTIMES_FILE), str(DOCS_FILE)):  # fmt: skip
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    matrix = tmp_path / "images/matrix.yaml"
    matrix.write_text(
        matrix.read_text(encoding="utf-8").replace("uid: 10001", "uid: 10002"), encoding="utf-8"
    )
    m = load_matrix(tmp_path)
    assert set(stale_files(tmp_path, m, {})) == {BAKE_FILE, RUNTIMES_FILE, DOCS_FILE}
    assert set(write_files(tmp_path, m, {})) == {BAKE_FILE, RUNTIMES_FILE, DOCS_FILE}
    assert stale_files(tmp_path, m, {}) == []
    assert '"HF_UID"             = "10002"' in (tmp_path / BAKE_FILE).read_text(encoding="utf-8")


def test_default_runtimes_validate_and_record_the_matrix_versions() -> None:
    m = load_matrix(ROOT)
    docs = [d for d in yaml.safe_load_all((ROOT / RUNTIMES_FILE).read_text(encoding="utf-8")) if d]
    # Local-only profiles (release: false) are built for the development cluster, never installed
    # as default runtimes.
    assert [d["metadata"]["name"] for d in docs] == [p.name for p in m.released_profiles]
    assert m.local_profiles, "the matrix must keep a profile that builds here (make images)"
    for doc, profile in zip(docs, m.released_profiles, strict=True):
        runtime = parse_runtime(doc)
        spec = runtime.spec
        assert spec.versions.torch == profile.torch.local_version
        assert spec.versions.python == profile.python
        assert spec.versions.cuda == profile.cuda
        assert spec.versions.nccl == profile.torch.nccl
        assert spec.accelerator == ("cpu" if profile.cuda is None else "nvidia-gpu")
        assert spec.images.base.startswith(m.base_image(profile) + "@sha256:")
        assert spec.images.framework.startswith(m.framework_image(profile) + "@sha256:")
        assert spec.pod.run_as_user == m.image_user.uid


def test_unpublished_images_carry_the_zero_digest_and_say_so() -> None:
    m = load_matrix(ROOT)
    docs = [d for d in yaml.safe_load_all(render_runtimes(m, {})) if d]
    assert len(docs) == len(m.released_profiles)
    for doc in docs:
        assert doc["metadata"]["annotations"][ANNOTATION_PUBLISHED] == "false"
        assert doc["spec"]["images"]["framework"].endswith("@" + UNPUBLISHED_DIGEST)


def test_published_digests_pin_the_runtimes() -> None:
    m = load_matrix(ROOT)
    p = m.default_profile
    published = {m.base_image(p): "sha256:" + "1" * 64, m.framework_image(p): "sha256:" + "2" * 64}
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(render_runtimes(m, published)) if d}
    default = docs[p.name]
    assert default["metadata"]["annotations"][ANNOTATION_PUBLISHED] == "true"
    assert default["spec"]["images"]["framework"] == f"{m.framework_image(p)}@sha256:{'2' * 64}"
    others = [d for name, d in docs.items() if name != p.name]
    assert all(d["metadata"]["annotations"][ANNOTATION_PUBLISHED] == "false" for d in others)


def test_push_metadata_is_recorded_and_read_back(tmp_path: Path) -> None:
    metadata = {
        "framework-cuda13": {
            "containerimage.digest": "sha256:" + "3" * 64,
            "image.name": "ghcr.io/hyperframe-dev/hyperframe-framework:0.1.0-torch2.13.0-cu130-py3.12",
        },
        "buildx.build.warnings": [],
    }
    pushed = digests_from_bake_metadata(json.dumps(metadata))
    assert pushed == {
        "ghcr.io/hyperframe-dev/hyperframe-framework:0.1.0-torch2.13.0-cu130-py3.12": "sha256:" + "3" * 64
    }
    (tmp_path / "images").mkdir()
    (tmp_path / "images/published.yaml").write_text(render_published(pushed), encoding="utf-8")
    assert load_published(tmp_path) == pushed
    (tmp_path / "images/published.yaml").write_text("images:\n  'a/b:c': sha256:nothex\n", encoding="utf-8")
    with pytest.raises(
        MatrixError,
        match=r"images\.a/b:c: \"sha256:nothex\" is not a sha256 digest of 64 lowercase hex digits: use ",
    ):
        load_published(tmp_path)


def _dockerfile_args(path: Path) -> set[str]:
    return set(re.findall(r"^ARG\s+([A-Z_]+)", path.read_text(encoding="utf-8"), flags=re.MULTILINE))


# pip's own settings, passed only to the targets of a wheelhouse profile (unset elsewhere).
PIP_ARGS = {"PIP_NO_INDEX", "PIP_FIND_LINKS"}


def test_bake_args_and_dockerfile_args_agree() -> None:
    """No pin reaches a Dockerfile except through the bake file, and no bake arg is dropped."""
    m = load_matrix(ROOT)
    for target, args in bake_args(m).items():
        kind = target.split("-")[0]
        declared = _dockerfile_args(DOCKERFILES[kind])
        assert set(args) - declared == set(), f"{target}: bake args not declared in {DOCKERFILES[kind].name}"
        assert declared - set(args) <= PIP_ARGS, (
            f"{target}: bake args {sorted(args)} vs {DOCKERFILES[kind].name} ARGs {sorted(declared)}"
        )
    local = m.local_profiles[0]
    for target in (f"operator-{local.name}", f"framework-{local.name}"):
        assert {"PIP_NO_INDEX", "PIP_FIND_LINKS"} <= set(bake_args(m)[target]), target
    assert not PIP_ARGS & set(bake_args(m)["framework-cuda13"])


def test_bake_file_builds_each_framework_on_its_own_base() -> None:
    m = load_matrix(ROOT)
    bake = render_bake(m)
    for p in m.profiles:
        block = bake.split(f'target "framework-{p.name}" {{')[1].split("\n}\n")[0]
        assert f'"hyperframe-base" = "target:base-{p.name}"' in block
        assert f"hyperframe-framework:{m.framework_tag(p)}" in block
        assert f'"HF_TORCH_VARIANT"   = "{p.torch.variant}"' in block
        base_block = bake.split(f'target "base-{p.name}" {{')[1].split("\n}\n")[0]
        if isinstance(p.base, DebootstrapBase):
            # FROM the root filesystem target; its tarball's sha256 is the recorded base digest.
            assert f'"hyperframe-rootfs-{p.name}" = "target:rootfs-{p.name}"' in base_block
            assert f'"sha256:${{ROOTFS_{p.name.upper()}_SHA256}}"' in base_block
            assert f'"{p.base.command}"' in base_block
        else:
            assert f'"{p.base.pinned}"' in base_block
    assert f'"${{REGISTRY}}/hyperframe-operator:{m.version}"' in bake
    local = m.local_profiles[0]
    group = bake.split('group "local" {')[1].split("\n}\n")[0]
    assert f'"operator-{local.name}", "base-{local.name}", "framework-{local.name}"' in group


def test_docs_table_lists_every_profile_between_the_markers() -> None:
    m = load_matrix(ROOT)
    doc = (ROOT / DOCS_FILE).read_text(encoding="utf-8")
    table = doc.split(DOCS_BEGIN)[1].split(DOCS_END)[0]
    for p in m.profiles:
        assert f"`{p.name}`" in table and p.torch.local_version in table and m.framework_tag(p) in table
    with pytest.raises(ValueError, match="must contain the markers"):
        splice_docs("no markers here", "table")
