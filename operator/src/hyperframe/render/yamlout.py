"""YAML output of rendered manifests: multi-document, key order kept, multi-line strings as blocks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

__all__ = ["dump_manifests"]


_BASE: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BASE):  # type: ignore[valid-type,misc]
    """SafeDumper that writes multi-line strings (the job.json ConfigMap) as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def dump_manifests(objects: Iterable[dict[str, Any]]) -> str:
    """Multi-document YAML, each document starting with ``---``."""
    return yaml.dump_all(list(objects), Dumper=_Dumper, sort_keys=False, explicit_start=True, width=120)
