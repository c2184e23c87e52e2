"""Generate the CRDs' OpenAPI v3 schemas from the model dataclasses.

The output is a *structural* schema as the API server requires: every object has ``type``,
free-form objects say ``x-kubernetes-preserve-unknown-fields`` explicitly, and cross-field rules
become CEL ``x-kubernetes-validations``. Defaults declared on the models are emitted as schema
defaults, so the API server and ``hyperframe render`` default a job identically.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hyperframe.api.fields import FieldMeta, Rule, field_meta, json_name, rules_of
from hyperframe.api.introspect import Shape, model_fields

__all__ = ["cel_rule", "schema_for_model"]


def cel_rule(rule: Rule) -> dict[str, Any]:
    """One ``x-kubernetes-validations`` entry; the fix text ends every message."""
    out: dict[str, Any] = {"rule": rule.cel, "message": f"{rule.message}: {rule.fix}"}
    if rule.message_format is not None:
        template = json.dumps(f"{rule.message_format}: {rule.fix.replace('%', '%%')}")
        out["messageExpression"] = f"{template}.format([{', '.join(rule.message_args)}])"
    if rule.field_path:
        out["fieldPath"] = rule.field_path
    out["reason"] = rule.reason
    return out


def schema_for_model(cls: type[Any]) -> dict[str, Any]:
    """The object schema of one model class, recursively."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for f, shape in model_fields(cls):
        meta = field_meta(f)
        name = json_name(f)
        prop: dict[str, Any] = {"description": meta.doc}
        prop.update(_schema_value(shape, meta))
        if f.default is not dataclasses.MISSING and f.default is not None:
            prop["default"] = list(f.default) if isinstance(f.default, tuple) else f.default
        elif f.default_factory is not dataclasses.MISSING and shape.kind == "model":
            # An empty object default makes the API server apply the nested defaults too.
            prop["default"] = {}
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(name)
        if meta.immutable:
            prop.setdefault("x-kubernetes-validations", []).append(
                {
                    "rule": "self == oldSelf",
                    "message": f"{name} is immutable after creation: delete and re-create the job to change it",
                    "reason": "FieldValueForbidden",
                }
            )
        properties[name] = prop
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    rules = [cel_rule(r) for r in rules_of(cls)]
    if rules:
        out["x-kubernetes-validations"] = rules
    return out


def _schema_value(shape: Shape, meta: FieldMeta) -> dict[str, Any]:
    kind = shape.kind
    if kind == "model":
        assert shape.model is not None
        nested = schema_for_model(shape.model)
        return nested
    if kind == "raw":
        raw: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        if meta.raw_keys:
            raw["properties"] = {
                k: {"description": f"The {k} (required).", "type": "string", "minLength": 1, "maxLength": 253}
                for k in meta.raw_keys
            }
            raw["required"] = list(meta.raw_keys)
        return raw
    if kind == "str":
        s: dict[str, Any]
        if meta.fmt == "quantity":
            s = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
        else:
            s = {"type": "string"}
        if meta.min_length is not None:
            s["minLength"] = meta.min_length
        if meta.max_length is not None:
            s["maxLength"] = meta.max_length
        if meta.fmt == "date-time":
            s["format"] = "date-time"
        elif (fmt := meta.str_format) is not None:
            s["pattern"] = fmt.pattern
        return s
    if kind in ("int", "float"):
        s = {"type": "integer"} if kind == "int" else {"type": "number"}
        if kind == "int":
            s["format"] = "int64" if (meta.maximum or 0) > 2**31 else "int32"
        if meta.minimum is not None:
            s["minimum"] = int(meta.minimum) if kind == "int" else meta.minimum
        if meta.maximum is not None:
            s["maximum"] = int(meta.maximum) if kind == "int" else meta.maximum
        if meta.exclusive_minimum:
            s["exclusiveMinimum"] = True
        if meta.exclusive_maximum:
            s["exclusiveMaximum"] = True
        return s
    if kind == "bool":
        return {"type": "boolean"}
    if kind == "enum":
        return {"type": "string", "enum": list(shape.choices)}
    if kind == "map":
        assert shape.item is not None
        m: dict[str, Any] = {
            "type": "object",
            "additionalProperties": _schema_value(shape.item, meta.item()),
        }
        if meta.max_items is not None:
            m["maxProperties"] = meta.max_items
        return m
    # list
    assert shape.item is not None
    arr: dict[str, Any] = {"type": "array", "items": _schema_value(shape.item, meta.item())}
    if meta.min_items is not None:
        arr["minItems"] = meta.min_items
    if meta.max_items is not None:
        arr["maxItems"] = meta.max_items
    if meta.unique_items:
        arr["x-kubernetes-list-type"] = "set"
    elif meta.map_keys:
        assert shape.item.model is not None or shape.item.kind == "raw"
        arr["x-kubernetes-list-type"] = "map"
        arr["x-kubernetes-list-map-keys"] = _wire_keys(shape.item, meta.map_keys)
    return arr


def _wire_keys(item: Shape, keys: tuple[str, ...]) -> list[str]:
    if item.model is None:
        return list(keys)
    names = {f.name: json_name(f) for f, _ in model_fields(item.model)}
    return [names[k] for k in keys]
