"""The core/v1 OpenAPI schema of the pinned Kubernetes version, for the objects render writes.

``core_v1_schema.json`` beside this file is generated once from the API server of the local
cluster (whose version ``cluster/versions.env`` pins) and kept in the repository:

    kubectl get --raw /openapi/v3/api/v1 > /tmp/core-v1.json
    python -m hyperframe.render.core_v1 /tmp/core-v1.json --version v1.36.3   # KUBERNETES_VERSION

Only the definitions that a Pod, a Service and a ConfigMap reach are kept, and of each only what
validation reads (types, properties, required, enums, formats, references); descriptions go.
``tests/integration/test_core_v1_schema.py`` regenerates it from the running API server and fails
on any difference.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

__all__ = ["KINDS", "SCHEMA_FILE", "definitions", "main", "select"]

SCHEMA_FILE: Final = Path(__file__).with_name("core_v1_schema.json")
KINDS: Final[Mapping[str, str]] = {
    "Pod": "io.k8s.api.core.v1.Pod",
    "Service": "io.k8s.api.core.v1.Service",
    "ConfigMap": "io.k8s.api.core.v1.ConfigMap",
}
_KEEP: Final = frozenset(
    {
        "type",
        "properties",
        "items",
        "required",
        "enum",
        "format",
        "$ref",
        "allOf",
        "oneOf",
        "additionalProperties",
    }
)
_REF: Final = re.compile(r'"#/components/schemas/([^"]+)"')


def _stripped(node: Any) -> Any:
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "properties":
                out[key] = {name: _stripped(sub) for name, sub in value.items()}
            elif key in _KEEP:
                out[key] = _stripped(value)
        return out
    if isinstance(node, list):
        return [_stripped(v) for v in node]
    return node


def select(openapi: Mapping[str, Any], version: str) -> dict[str, Any]:
    """The kept definitions of an ``/openapi/v3/api/v1`` document."""
    schemas: Mapping[str, Any] = openapi["components"]["schemas"]
    keep: set[str] = set()
    todo = list(KINDS.values())
    while todo:
        name = todo.pop()
        if name not in keep:
            keep.add(name)
            todo.extend(_REF.findall(json.dumps(schemas[name])))
    return {
        "kubernetesVersion": version,
        "kinds": dict(KINDS),
        "definitions": {name: _stripped(schemas[name]) for name in sorted(keep)},
    }


@functools.cache
def definitions() -> Mapping[str, Any]:
    """The kept definitions, by name (``io.k8s.api.core.v1.Pod``, ...)."""
    data: Mapping[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))["definitions"]
    return data


def render_file(openapi: Mapping[str, Any], version: str) -> str:
    return json.dumps(select(openapi, version), indent=1, sort_keys=True) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Write core_v1_schema.json from the API server's OpenAPI v3."
    )
    parser.add_argument("openapi", type=Path, help="the output of kubectl get --raw /openapi/v3/api/v1")
    parser.add_argument("--version", required=True, help="the API server's gitVersion, e.g. v1.36.3")
    args = parser.parse_args(argv)
    openapi = json.loads(args.openapi.read_text(encoding="utf-8"))
    SCHEMA_FILE.write_text(render_file(openapi, args.version), encoding="utf-8")
    print(f"wrote {SCHEMA_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
