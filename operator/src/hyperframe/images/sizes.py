"""Measure what the framework layers weigh, in the Python environment that runs this module.

Run it with the interpreter of a venv built by images/install-framework.sh (the integration test
builds one): `<venv>/bin/python -m hyperframe.images sizes`. It sums the installed files of
each distribution (from their RECORD) and groups them the way Dockerfile.framework layers them:
torch with its dependency closure, then the other third-party dependencies, then hyperframe.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

__all__ = ["LayerSize", "closure", "layer_sizes", "render_sizes"]

_APP = ("hyperframe", "hyperframe-runtime")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True, slots=True)
class LayerSize:
    layer: str
    distributions: int
    bytes: int


def _installed() -> dict[str, metadata.Distribution]:
    return {_norm(d.metadata["Name"]): d for d in metadata.distributions()}


_REQ_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_EXTRA_RE = re.compile(r"extra\s*==\s*['\"]([^'\"]+)['\"]")


def closure(roots: Iterable[str], installed: dict[str, metadata.Distribution]) -> set[str]:
    """The installed distributions `roots` need, following Requires-Dist and requested extras.

    Markers other than `extra` are taken as true: those of torch's and our dependencies
    (platform_system == "Linux", python_version < "3.15") hold in the Linux images.
    """
    todo: list[tuple[str, frozenset[str]]] = [(_norm(r), frozenset()) for r in roots]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen or name not in installed:
            continue
        seen.add((name, extras))
        for raw in installed[name].requires or ():
            requirement, _, marker = raw.partition(";")
            needed_extra = _EXTRA_RE.search(marker)
            if needed_extra is not None and needed_extra.group(1) not in extras:
                continue
            match = _REQ_RE.match(requirement)
            if match is not None:
                wanted = frozenset(e.strip() for e in (match.group(2) or "").split(",") if e.strip())
                todo.append((_norm(match.group(1)), wanted))
    return {name for name, _ in seen}


def _bytes(dist: metadata.Distribution) -> int:
    total = 0
    for f in dist.files or ():
        if f.size is not None:
            total += f.size
        else:
            path = Path(str(f.locate()))
            total += path.stat().st_size if path.is_file() else 0
    return total


def layer_sizes() -> list[LayerSize]:
    installed = _installed()
    torch_layer = closure(["torch"], installed)
    app_layer = {n for n in _APP if n in installed}
    deps_layer = closure(_APP, installed) - torch_layer - app_layer
    rest = set(installed) - torch_layer - deps_layer - app_layer
    groups = [
        ("torch + CUDA wheels", torch_layer),
        ("third-party deps", deps_layer),
        ("hyperframe", app_layer),
    ]
    groups.append(("venv tooling (pip, setuptools)", rest))
    return [LayerSize(label, len(names), sum(_bytes(installed[n]) for n in names)) for label, names in groups]


def render_sizes(sizes: list[LayerSize]) -> str:
    lines = ["| Layer | Distributions | Installed size |", "|---|---|---|"]
    for s in sizes:
        lines.append(f"| {s.layer} | {s.distributions} | {s.bytes / 2**20:,.1f} MiB |")
    total = sum(s.bytes for s in sizes)
    lines.append(f"| total | {sum(s.distributions for s in sizes)} | {total / 2**20:,.1f} MiB |")
    return "\n".join(lines)
