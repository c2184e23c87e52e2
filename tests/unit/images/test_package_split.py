"""The framework image installs `hyperframe` without its `operator` extra, so no module that the
runtime can reach may import the operator's Kubernetes stack: only hyperframe.controller does."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OPERATOR_SRC = ROOT / "operator/src/hyperframe"
RUNTIME_SRC = ROOT / "runtime/src/hyperframe_runtime"


def _extra(name: str) -> set[str]:
    project = tomllib.loads((ROOT / "operator/pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = project["optional-dependencies"][name]
    return {req.split(">")[0].split("=")[0].split("<")[0].strip() for req in reqs}


def _top_level_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_operator_extra_holds_the_kubernetes_stack_and_the_base_install_does_not() -> None:
    project = tomllib.loads((ROOT / "operator/pyproject.toml").read_text(encoding="utf-8"))["project"]
    base = " ".join(project["dependencies"])
    extra = _extra("operator")
    assert extra == {"kopf", "kubernetes", "aiohttp", "prometheus-client"}
    for name in extra:
        assert name not in base, f"{name} is a base dependency of hyperframe; move it to the operator extra"


def test_only_the_controller_imports_the_operator_extra() -> None:
    modules = {name.replace("-", "_") for name in _extra("operator")}
    offenders = []
    for path in [*OPERATOR_SRC.rglob("*.py"), *RUNTIME_SRC.rglob("*.py")]:
        if OPERATOR_SRC / "controller" in path.parents:
            continue
        bad = _top_level_imports(path) & modules
        if bad:
            offenders.append(f"{path.relative_to(ROOT)}: {sorted(bad)}")
    assert offenders == [], "import these only in hyperframe.controller (the operator extra):\n" + "\n".join(
        offenders
    )


def test_the_check_finds_an_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    import kopf\n    from kubernetes import client\n", encoding="utf-8")
    assert _top_level_imports(module) >= {"kopf", "kubernetes"}
