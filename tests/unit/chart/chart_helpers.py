"""Helpers shared by the chart's unit tests (fixtures are in conftest.py)."""

from __future__ import annotations

import importlib.util
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml
from hyperframe_devcluster import paths

CHART = paths.repo_root() / "charts" / "hyperframe-operator"

Render = Callable[..., list[dict[str, Any]]]
"""The `render` fixture: values (and release, namespace) in, rendered objects out."""


def run_helm(
    helm: Path, *args: str, values: dict[str, Any] | None = None, tmp: Path | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = [str(helm), *args]
    if values is not None:
        assert tmp is not None
        values_file = tmp / "values.yaml"
        values_file.write_text(yaml.safe_dump(values))
        cmd += ["-f", str(values_file)]
    return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def load_generator() -> ModuleType:
    """The chart generator (charts/hyperframe-operator/hack/generate.py), imported by path."""
    spec = importlib.util.spec_from_file_location("chart_generate", CHART / "hack" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
