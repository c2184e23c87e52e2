"""The part of values.schema.json that comes from the HyperFrameRuntime CRD: `runtimes.profiles.*`.

Helm creates objects without strict field validation, so the API server would silently prune a
misspelt field of a runtime profile. Checking `runtimes.profiles.<name>` against the CRD's own
`spec` schema makes a typo fail `helm install` instead. The CRD's OpenAPI schema becomes a JSON
schema for a *partial* spec (it is deep-merged over a default profile): `required` and
`default` are dropped, every object with `properties` forbids other keys (unless the CRD keeps
unknown fields), and the Kubernetes extensions become their JSON-schema equivalents. The rest
of values.schema.json is written by hand; only this sub-tree is generated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from hyperframe.constants import RUNTIME_PLURAL

PROFILES_POINTER: Final = ("properties", "runtimes", "properties", "profiles", "additionalProperties")
_KEPT: Final = frozenset(
    {
        "type",
        "enum",
        "pattern",
        "minimum",
        "maximum",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "maxProperties",
    }
)


def partial_json_schema(node: dict[str, Any]) -> dict[str, Any]:
    """A CRD structural-schema node as a JSON schema for a partial value."""
    out: dict[str, Any] = {key: value for key, value in node.items() if key in _KEPT}
    if node.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    if "properties" in node:
        out["properties"] = {name: partial_json_schema(child) for name, child in node["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = partial_json_schema(node["additionalProperties"])
    if "items" in node:
        out["items"] = partial_json_schema(node["items"])
    if "anyOf" in node:
        out["anyOf"] = [partial_json_schema(choice) for choice in node["anyOf"]]
    return out


def runtime_spec_schema(crds: list[dict[str, Any]]) -> dict[str, Any]:
    [crd] = [c for c in crds if c["spec"]["names"]["plural"] == RUNTIME_PLURAL]
    [version] = [v for v in crd["spec"]["versions"] if v.get("storage")]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    schema = partial_json_schema(spec)
    schema["description"] = (
        f"A HyperFrameRuntime spec, or the part of one to change (generated from crds/ for {crd['metadata']['name']})."
    )
    return schema


def values_schema(current: Path, crds: list[dict[str, Any]]) -> str:
    """values.schema.json with its runtimes.profiles sub-tree regenerated from the CRD."""
    schema = json.loads(current.read_text(encoding="utf-8"))
    node = schema
    for key in PROFILES_POINTER[:-1]:
        node = node[key]
    node[PROFILES_POINTER[-1]] = runtime_spec_schema(crds)
    return json.dumps(schema, indent=2) + "\n"
