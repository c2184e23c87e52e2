"""The API and the renderer stay pure: no cluster clients, and layers import downwards only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "operator" / "src" / "hyperframe"
FORBIDDEN = {
    "api": (
        "hyperframe.render",
        "hyperframe.controller",
        "hyperframe.cli",
        "kopf",
        "kubernetes",
        "aiohttp",
        "torch",
    ),
    "render": (
        "hyperframe.controller",
        "hyperframe.cli",
        "kopf",
        "kubernetes",
        "aiohttp",
        "torch",
        "urllib",
        "socket",
    ),
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_forbidden_imports(package: str) -> None:
    files = sorted((SRC / package).glob("*.py"))
    assert files
    for path in files:
        for name in _imports(path):
            bad = [f for f in FORBIDDEN[package] if name == f or name.startswith(f + ".")]
            assert not bad, f"{path.relative_to(SRC)} imports {name}"


def test_templates_only_write_values_through_the_json_filter() -> None:
    # Every {{ ... }} ends in `| j`, so no value can break the YAML structure.
    for template in sorted((SRC / "render" / "templates").glob("*.j2")):
        text = template.read_text(encoding="utf-8")
        for chunk in text.split("{{")[1:]:
            expr = chunk.split("}}")[0]
            assert expr.strip().endswith("| j"), f"{template.name}: {{{{{expr}}}}}"
