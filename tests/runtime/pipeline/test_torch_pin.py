"""The torch range the runtime package allows is exactly the range its private-API adapter is tested with.

runtime/pyproject.toml's ``torch`` requirement, ``TESTED_TORCH`` in ``pipeline/torch_adapter.py``
and the torch of every image profile in images/matrix.yaml must agree: widening one without the
others would ship an untested torch.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml
from hyperframe_runtime.pipeline.torch_adapter import TESTED_TORCH, is_tested_torch

REPO = Path(__file__).resolve().parents[3]


def _torch_requirement() -> str:
    project = tomllib.loads((REPO / "runtime" / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (requirement,) = [d for d in project["dependencies"] if d.split(">")[0].split("=")[0].strip() == "torch"]
    return requirement.replace(" ", "")


def test_runtime_package_allows_exactly_the_tested_range() -> None:
    (lo_major, lo_minor), (hi_major, hi_minor) = TESTED_TORCH
    assert _torch_requirement() == f"torch>={lo_major}.{lo_minor},<{hi_major}.{hi_minor}"


def test_every_image_profile_ships_a_tested_torch() -> None:
    matrix = yaml.safe_load((REPO / "images" / "matrix.yaml").read_text(encoding="utf-8"))
    versions = {name: str(p["torch"]["version"]) for name, p in matrix["profiles"].items() if "torch" in p}
    assert versions, "images/matrix.yaml has no torch pins"
    untested = {name: v for name, v in versions.items() if not is_tested_torch(v)}
    assert not untested, f"image profiles pin torch outside TESTED_TORCH {TESTED_TORCH}: {untested}"
