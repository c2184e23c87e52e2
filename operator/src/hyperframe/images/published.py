"""Digests of the images this project pushed: `images/published.yaml`, written by a push.

A HyperFrameRuntime must name its images by digest, and the digest of an image exists only once
it is built and pushed. `images/build.sh --push` records the digests buildx reports; the runtime
profiles are then regenerated from the matrix plus these digests. A profile whose images were
never pushed gets the all-zero digest and the annotation `hyperframe.dev/images-published:
"false"`, and `python -m hyperframe.images check --release` refuses to ship it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hyperframe.api.codec import parse
from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.fields import value_rules
from hyperframe.images.matrix import DIGEST
from hyperframe.images.validate import MatrixError

__all__ = [
    "PUBLISHED_FILE",
    "UNPUBLISHED_DIGEST",
    "digests_from_bake_metadata",
    "load_published",
    "render_published",
]

PUBLISHED_FILE = Path("images/published.yaml")
UNPUBLISHED_DIGEST = "sha256:" + "0" * 64
_REF_RE = re.compile(r"^[a-z0-9]+([._/:-][a-z0-9]+)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")

_HEADER = (
    "# Digests of the images `images/build.sh --push` pushed, keyed by tag. Written by the push;\n"
    "# do not edit by hand. `make generate` pins the default runtime profiles to these digests.\n"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Published:
    images: Mapping[str, str] = field(metadata=value_rules(fmt=DIGEST))
    """Tag reference -> the digest pushed."""


def load_published(root: Path) -> dict[str, str]:
    """tag reference -> digest; {} when nothing was pushed yet."""
    path = root / PUBLISHED_FILE
    if not path.is_file():
        return {}
    errors: list[FieldError] = []
    try:
        images = parse(_Published, yaml.safe_load(path.read_text(encoding="utf-8")) or {}, path="").images
    except SpecError as exc:
        errors, images = exc.errors, {}
    errors += [
        FieldError(f"images.{ref}", "is not a repository:tag reference", "fix the key")
        for ref in images
        if not _REF_RE.match(ref)
    ]
    if errors:
        raise MatrixError([f"{PUBLISHED_FILE}: {e}" for e in errors])
    return dict(images)


def render_published(images: Mapping[str, str]) -> str:
    return _HEADER + yaml.safe_dump({"images": dict(sorted(images.items()))}, sort_keys=False)


def digests_from_bake_metadata(metadata_json: str) -> dict[str, str]:
    """tag -> digest from `docker buildx bake --metadata-file` output (one entry per target)."""
    data = json.loads(metadata_json)
    out: dict[str, str] = {}
    for target in data.values() if isinstance(data, dict) else ():
        if not isinstance(target, dict):
            continue
        digest = target.get("containerimage.digest")
        names = str(target.get("image.name", ""))
        if isinstance(digest, str) and DIGEST.matches(digest):
            for name in filter(None, names.split(",")):
                out[name.strip()] = digest
    return out
