"""`images/build.sh --resolve`: refreshing digests and NCCL pins rewrites only those lines (and
their provenance), keeps the matrix valid, and refuses answers that are not digests or versions.
The registry readers are injected; the real ones need Docker Hub and the torch indexes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hyperframe.images.matrix import BaseImage, Profile
from hyperframe.images.repo import MATRIX_FILE, load_matrix
from hyperframe.images.resolve import nccl_from_metadata, resolve_matrix_text
from hyperframe.images.validate import parse_matrix

ROOT = Path(__file__).resolve().parents[3]
NEW = "sha256:" + "b" * 64


def _text() -> str:
    return (ROOT / MATRIX_FILE).read_text(encoding="utf-8")


def test_changed_digest_and_nccl_are_rewritten_with_their_source() -> None:
    m = load_matrix(ROOT)
    cuda13 = m.profile("cuda13")
    asked: list[str] = []

    def digest_of(image: str) -> str:
        asked.append(image)
        return (
            NEW
            if image == cuda13.base.image
            else next(
                p.base.digest for p in m.profiles if isinstance(p.base, BaseImage) and p.base.image == image
            )
        )

    def nccl_of(profile: Profile) -> str:
        return "2.30.1" if profile.name == "cuda12" else str(profile.torch.nccl)

    text, changes = resolve_matrix_text(_text(), m, digest_of=digest_of, nccl_of=nccl_of, today="2026-11-29")
    assert [str(c) for c in changes] == [
        f"profiles.cuda13.base.digest: {cuda13.base.digest} -> {NEW}",
        "profiles.cuda12.torch.nccl: 2.29.7 -> 2.30.1",
    ]
    # One registry question per distinct image: the operator and cpu bases are the same image. A
    # debootstrap base is made here, not pulled, so the registry is not asked about it.
    pulled = {p.base.image for p in m.profiles if isinstance(p.base, BaseImage)}
    assert len(pulled) < len(m.profiles)
    assert sorted(asked) == sorted({m.operator.base.image, *pulled})
    updated = parse_matrix(yaml.safe_load(text), version=m.version)
    assert updated.profile("cuda13").base.digest == NEW
    assert updated.profile("cuda13").base.source.startswith("resolved from the registry")
    assert updated.profile("cuda12").torch.nccl == "2.30.1"
    assert updated.profile("cuda13").torch.nccl == "2.29.7"
    assert updated.profile("cuda12").base.digest == m.profile("cuda12").base.digest
    # Comments and layout survive: only the resolved lines differ.
    changed = [(a, b) for a, b in zip(_text().splitlines(), text.splitlines(), strict=True) if a != b]
    assert all(any(k in b for k in ("digest:", "source:", "nccl:", "nccl_source:")) for _, b in changed)


def test_a_registry_answer_that_is_not_a_digest_is_refused() -> None:
    m = load_matrix(ROOT)
    with pytest.raises(ValueError, match="not sha256:<64 hex>"):
        resolve_matrix_text(_text(), m, digest_of=lambda _: "latest", nccl_of=lambda p: "2.29.7", today="x")


def test_nccl_is_read_from_the_wheel_metadata() -> None:
    metadata = (
        "Metadata-Version: 2.4\nName: torch\nVersion: 2.13.0+cu129\n"
        'Requires-Dist: nvidia-cudnn-cu12==9.20.0.48; platform_system == "Linux"\n'
        'Requires-Dist: nvidia-nccl-cu12==2.29.7; platform_system == "Linux"\n'
    )
    assert nccl_from_metadata(metadata) == "2.29.7"
    with pytest.raises(ValueError, match="no Requires-Dist: nvidia-nccl"):
        nccl_from_metadata("Name: torch\nVersion: 2.13.0+cpu\n")


def test_the_installed_torch_metadata_agrees_with_the_matrix() -> None:
    """The NCCL pin of the profile whose torch is installed here was read from this very wheel."""
    from importlib import metadata

    try:
        dist = metadata.distribution("torch")
    except metadata.PackageNotFoundError:
        pytest.skip("torch is not installed in this environment")
    m = load_matrix(ROOT)
    text = dist.read_text("METADATA") or ""
    profile = next(
        p
        for p in m.profiles
        if p.torch.version == dist.version and p.torch.index_url.startswith("https://pypi.org")
    )
    assert nccl_from_metadata(text) == profile.torch.nccl
