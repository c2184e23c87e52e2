"""Fixtures for the chart's unit tests: `helm template` and `helm lint` with the pinned helm, no cluster."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import CHART, Render, run_helm
from hyperframe_devcluster import paths


@pytest.fixture(scope="session")
def helm() -> Path:
    # Built by `make cluster-build` (a dependency of `make test`); a missing binary is a setup
    # error to fix, not a reason to skip.
    return paths.helm()


@pytest.fixture
def render(helm: Path, tmp_path: Path) -> Render:
    """Render the chart with `values` and return its objects (hooks included, test hooks too)."""

    def _render(
        values: dict[str, Any] | None = None, *, release: str = "hf", namespace: str = "hyperframe-system"
    ) -> list[dict[str, Any]]:
        result = run_helm(
            helm, "template", release, str(CHART), "--namespace", namespace, values=values or {}, tmp=tmp_path
        )
        assert result.returncode == 0, result.stderr
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]

    return _render


@pytest.fixture
def render_error(helm: Path, tmp_path: Path) -> Callable[[dict[str, Any]], str]:
    """Render the chart with `values` that must be rejected; return helm's error message."""

    def _render_error(values: dict[str, Any]) -> str:
        result = run_helm(helm, "template", "hf", str(CHART), values=values, tmp=tmp_path)
        assert result.returncode != 0, f"helm accepted {values}:\n{result.stdout[:2000]}"
        return result.stderr

    return _render_error
