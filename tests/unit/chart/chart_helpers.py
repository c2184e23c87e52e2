"""Helpers shared by the chart's unit tests (fixtures are in conftest.py)."""

from __future__ import annotations

import importlib.util
from types import ModuleType
from typing import Any

from hyperframe_devcluster import paths

CHART = paths.repo_root() / "charts" / "hyperframe-operator"


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
