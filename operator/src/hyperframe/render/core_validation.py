"""Check a rendered object against the core/v1 schema, as the API server's decoding does.

The API server decodes a Pod, Service or ConfigMap into its Go types (a wrong type, a number out
of int32 or a malformed quantity is refused there), refuses unknown fields under strict field
validation, and then requires the required fields and the enum values. This module does the
same from :mod:`hyperframe.render.core_v1`'s generated schema, for every field of the object,
including the ones passed through from the job untouched. Paths are the object's own
(``spec.volumes[2].hostPath.type``); :mod:`hyperframe.render` maps them to the job's fields.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any, Final

from hyperframe.api.errors import FieldError
from hyperframe.render.core_v1 import KINDS, definitions

__all__ = ["core_v1_errors"]

_QUANTITY_DEF: Final = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_QUANTITY: Final = re.compile(
    r"^[+-]?(\d+(\.\d*)?|\.\d+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?(\d+(\.\d*)?|\.\d+))?$"
)
_INT32: Final = (-(2**31), 2**31 - 1)


def core_v1_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every problem of ``obj`` (a Pod, Service or ConfigMap) against the core/v1 schema."""
    root = KINDS.get(str(obj.get("kind")))
    if root is None:
        return []
    errors: list[FieldError] = []
    _check({"$ref": f"#/components/schemas/{root}"}, obj, "", errors)
    return errors


def _resolve(node: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    """The schema a node stands for (following $ref and a one-element allOf) and its name."""
    name = None
    while True:
        if "$ref" in node:
            name = str(node["$ref"]).rsplit("/", 1)[-1]
            node = definitions()[name]
        elif "allOf" in node and len(node["allOf"]) == 1:
            node = node["allOf"][0]
        else:
            return node, name


def _describe(v: Any) -> str:
    if isinstance(v, bool):
        return f"boolean {str(v).lower()}"
    if isinstance(v, int | float):
        return f"number {v}"
    if isinstance(v, str):
        return f'string "{v}"'
    return "a list" if isinstance(v, list) else "an object"


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _check(node: Mapping[str, Any], value: Any, path: str, errors: list[FieldError]) -> None:
    if value is None:
        return  # JSON null decodes to the field's zero value
    schema, name = _resolve(node)
    if name == _QUANTITY_DEF:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            errors.append(
                FieldError(path, f"expected a quantity, got {_describe(value)}", "use e.g. 16Gi or 500m")
            )
        elif isinstance(value, str) and not _QUANTITY.match(value):
            errors.append(
                FieldError(path, f'"{value}" is not a Kubernetes quantity', "use e.g. 16Gi or 500m")
            )
        return
    if schema.get("format") == "int-or-string":
        if isinstance(value, bool) or not isinstance(value, int | str):
            errors.append(
                FieldError(path, f"expected an integer or a string, got {_describe(value)}", "use one")
            )
        return
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        _check_object(schema, value, path, errors)
    elif kind == "array":
        if not isinstance(value, list):
            errors.append(FieldError(path, f"expected a list, got {_describe(value)}", "write a list"))
            return
        for i, item in enumerate(value):
            _check(schema.get("items", {}), item, f"{path}[{i}]", errors)
    elif kind is not None:
        _check_scalar(schema, str(kind), value, path, errors)


def _check_object(schema: Mapping[str, Any], value: Any, path: str, errors: list[FieldError]) -> None:
    if not isinstance(value, Mapping):
        errors.append(
            FieldError(path, f"expected an object, got {_describe(value)}", "write a mapping of fields")
        )
        return
    props: Mapping[str, Any] | None = schema.get("properties")
    extra = schema.get("additionalProperties")
    if props is None and not isinstance(extra, Mapping):
        return  # free-form (RawExtension, FieldsV1)
    for key in schema.get("required", ()):
        if value.get(key) in (None, ""):
            errors.append(FieldError(_join(path, key), "required value is missing", f"set {key}"))
    for key, item in value.items():
        sub = (props or {}).get(key)
        if sub is None and isinstance(extra, Mapping):
            _check(extra, item, f"{path}[{key}]" if path else str(key), errors)
        elif sub is None:
            close = difflib.get_close_matches(str(key), list(props or ()), n=1)
            hint = f'did you mean "{close[0]}"?' if close else "it is not a field of this object"
            errors.append(
                FieldError(_join(path, str(key)), "unknown field", f"remove it or fix the spelling ({hint})")
            )
        else:
            _check(sub, item, _join(path, str(key)), errors)


def _check_scalar(
    schema: Mapping[str, Any], kind: str, value: Any, path: str, errors: list[FieldError]
) -> None:
    ok = {
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
    }.get(kind, True)
    if not ok:
        article = "an" if kind == "integer" else "a"
        errors.append(
            FieldError(path, f"expected {article} {kind}, got {_describe(value)}", f"use {article} {kind}")
        )
        return
    if kind == "integer" and schema.get("format") == "int32" and not _INT32[0] <= value <= _INT32[1]:
        errors.append(FieldError(path, f"{value} does not fit in 32 bits", "use a smaller number"))
    enum = schema.get("enum")
    if enum and value not in enum:
        errors.append(
            FieldError(
                path,
                f"unsupported value {_describe(value)}",
                "use one of " + ", ".join(f'"{v}"' for v in enum),
            )
        )
