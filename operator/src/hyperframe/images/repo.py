"""Where the matrix and its generated files live in the repository, and how the matrix is loaded.

The release version is the `hyperframe` package version in operator/pyproject.toml; the runtime
package must carry the same version and depend on exactly it, which `load_matrix` checks.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from hyperframe.images.matrix import Matrix
from hyperframe.images.validate import MatrixError, parse_matrix

__all__ = [
    "BAKE_FILE",
    "DOCS_FILE",
    "MATRIX_FILE",
    "RUNTIMES_FILE",
    "find_root",
    "load_matrix",
    "release_version",
]

MATRIX_FILE = Path("images/matrix.yaml")
BAKE_FILE = Path("docker-bake.hcl")
RUNTIMES_FILE = Path("images/generated/runtimes.yaml")
DOCS_FILE = Path("docs/images.md")
OPERATOR_PYPROJECT = Path("operator/pyproject.toml")
RUNTIME_PYPROJECT = Path("runtime/pyproject.toml")


def find_root(start: Path | None = None) -> Path:
    """The repository root: the nearest directory above `start` that holds images/matrix.yaml."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / MATRIX_FILE).is_file():
            return candidate
    raise FileNotFoundError(f"no {MATRIX_FILE} above {here}; run from the HyperFrame repository")


def _project(root: Path, pyproject: Path) -> dict[str, object]:
    data = tomllib.loads((root / pyproject).read_text(encoding="utf-8"))
    project = data.get("project")
    if not isinstance(project, dict):
        raise MatrixError([f"{pyproject}: has no [project] table"])
    return project


def release_version(root: Path) -> str:
    """The `hyperframe` version, after checking that hyperframe-runtime agrees with it."""
    operator = _project(root, OPERATOR_PYPROJECT)
    runtime = _project(root, RUNTIME_PYPROJECT)
    version = str(operator.get("version"))
    problems = []
    if str(runtime.get("version")) != version:
        problems.append(
            f"{RUNTIME_PYPROJECT}: version {runtime.get('version')} differs from hyperframe {version} in "
            f"{OPERATOR_PYPROJECT}; the images carry both, so release them with one version"
        )
    deps = runtime.get("dependencies")
    pins = (
        [d for d in deps if isinstance(d, str) and re.match(r"^hyperframe\s*==", d)]
        if isinstance(deps, list)
        else []
    )
    if pins != [f"hyperframe=={version}"]:
        problems.append(
            f"{RUNTIME_PYPROJECT}: dependencies must pin hyperframe=={version} exactly, found {pins}"
        )
    if problems:
        raise MatrixError(problems)
    return version


def load_matrix(root: Path) -> Matrix:
    """Load and validate images/matrix.yaml (raises MatrixError naming every bad field)."""
    data = yaml.safe_load((root / MATRIX_FILE).read_text(encoding="utf-8"))
    return parse_matrix(data, version=release_version(root))
