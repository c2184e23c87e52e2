"""The ``transformers`` pin is written twice (runtime/pyproject.toml, which the framework image
installs, and requirements-dev.txt); the two must agree, and the installed version must be it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import transformers

REPO = Path(__file__).resolve().parents[3]


def _pin(lines: list[str]) -> str:
    (line,) = [line for line in lines if line.split("==")[0].strip() == "transformers"]
    return line.split("==")[1].split()[0].strip()


def test_the_transformers_pin_is_the_same_in_both_places_and_installed() -> None:
    project = tomllib.loads((REPO / "runtime" / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = _pin(project["dependencies"])
    dev = _pin((REPO / "requirements-dev.txt").read_text(encoding="utf-8").splitlines())
    assert runtime == dev == transformers.__version__
