"""Refresh the pins of images/matrix.yaml from the registries: `images/build.sh --resolve`.

Two facts in the matrix can only be read from outside: the digest behind each base image tag
(Docker Hub) and the NCCL version each torch wheel depends on (the profile's package index).
This module reads both through injected readers and rewrites the matrix text in place, keeping
its comments and layout. The default readers shell out to `docker buildx imagetools inspect`
and `pip download --no-deps`; tests inject fakes.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hyperframe.images.matrix import DIGEST, RELEASE, BaseImage, Matrix, Profile

__all__ = [
    "Change",
    "nccl_from_metadata",
    "pip_nccl_reader",
    "registry_digest_reader",
    "resolve_matrix_text",
]

DigestReader = Callable[[str], str]
"""image `repository:tag` -> its current index digest."""
NcclReader = Callable[[Profile], str]
"""profile -> the NCCL version its torch wheel depends on."""

_NCCL_REQ_RE = re.compile(r"^Requires-Dist:\s*nvidia-nccl-cu\d+\s*==\s*([0-9.]+)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Change:
    where: str
    old: str
    new: str

    def __str__(self) -> str:
        return f"{self.where}: {self.old} -> {self.new}"


def nccl_from_metadata(metadata: str) -> str:
    """The nvidia-nccl-cu* pin of a torch wheel's METADATA."""
    match = _NCCL_REQ_RE.search(metadata)
    if match is None:
        raise ValueError("the torch wheel METADATA has no Requires-Dist: nvidia-nccl-cu*==X pin")
    return match.group(1)


def registry_digest_reader(image: str) -> str:
    """Ask the registry (through buildx) for the index digest behind a tag."""
    out = subprocess.run(
        ["docker", "buildx", "imagetools", "inspect", image, "--format", "{{json .Manifest.Digest}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    digest = out.strip('"')
    if not DIGEST.matches(digest):
        raise ValueError(f"registry answered {out!r} for {image}, not a sha256 digest")
    return digest


def pip_nccl_reader(profile: Profile) -> str:
    """Download the profile's torch wheel (no dependencies) and read its NCCL pin."""
    torch = profile.torch
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", tmp,
                "--index-url", torch.index_url, "--only-binary", ":all:",
                "--platform", "manylinux_2_28_x86_64", "--python-version", profile.python,
                f"torch=={torch.local_version}" if "pypi.org" not in torch.index_url else f"torch=={torch.version}",
            ],
            check=True,
        )  # fmt: skip
        wheel = next(Path(tmp).glob("torch-*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            return nccl_from_metadata(zf.read(name).decode("utf-8"))


_PROFILE_LINE = re.compile(r"^  ([a-z0-9-]+):\s*$")
_FIELD_LINE = re.compile(r"^(\s*)(image|digest|source|nccl|nccl_source):\s*(.*?)\s*$")


def _rewrite(text: str, digests: dict[str, str], nccls: dict[str, str], today: str) -> str:
    """Rewrite digest/source lines under each resolved image and nccl/nccl_source lines per profile."""
    out: list[str] = []
    profile = image = None
    for line in text.splitlines(keepends=True):
        if (pm := _PROFILE_LINE.match(line)) is not None:
            profile = pm.group(1)
        fm = _FIELD_LINE.match(line)
        if fm is not None:
            indent, key, value = fm.groups()
            if key == "image":
                image = value
            elif key == "digest" and image in digests:
                line = f"{indent}digest: {digests[image]}\n"
            elif key == "source" and image in digests:
                line = f"{indent}source: resolved from the registry (docker buildx imagetools inspect) on {today}\n"
            elif key == "nccl" and profile in nccls:
                line = f"{indent}nccl: {nccls[profile]}\n"
            elif key == "nccl_source" and profile in nccls:
                line = (
                    f"{indent}nccl_source: read from the wheel METADATA (pip download --no-deps) on {today}\n"
                )
        out.append(line)
    return "".join(out)


def resolve_matrix_text(
    text: str, m: Matrix, *, digest_of: DigestReader, nccl_of: NcclReader, today: str
) -> tuple[str, list[Change]]:
    """Return the matrix text with fresh digests and NCCL pins (and their sources), and what changed."""
    changes: list[Change] = []
    bases: list[tuple[str, BaseImage]] = [("operator.base", m.operator.base)]
    # A debootstrap base is made here, not pulled: it has no registry digest to re-read.
    bases += [(f"profiles.{p.name}.base", p.base) for p in m.profiles if isinstance(p.base, BaseImage)]
    digests: dict[str, str] = {}
    for where, base in bases:
        if base.image not in digests:
            digests[base.image] = digest_of(base.image)
            if not DIGEST.matches(digests[base.image]):
                raise ValueError(
                    f"{where}.digest: the registry answered {digests[base.image]!r}, not sha256:<64 hex>"
                )
        if digests[base.image] != base.digest:
            changes.append(Change(f"{where}.digest", base.digest, digests[base.image]))
    nccls: dict[str, str] = {}
    for p in m.profiles:
        if p.torch.nccl is None:
            continue
        nccls[p.name] = nccl_of(p)
        if not RELEASE.matches(nccls[p.name]):
            raise ValueError(f"profiles.{p.name}.torch.nccl: the wheel says {nccls[p.name]!r}, not x.y.z")
        if nccls[p.name] != p.torch.nccl:
            changes.append(Change(f"profiles.{p.name}.torch.nccl", p.torch.nccl, nccls[p.name]))
    return _rewrite(text, digests, nccls, today), changes
