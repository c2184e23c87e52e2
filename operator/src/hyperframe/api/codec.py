"""Parse plain dicts into model dataclasses (collecting every error) and dump them back.

Parsing is strict the way ``kubectl apply --validate=strict`` is: unknown fields are errors
(with a did-you-mean), because a misspelt field that is silently ignored is the worst kind of
bug in a training job. Every error carries the full field path.

:func:`parse_lenient` is the forgiving twin for wire formats that another version of the project
writes (the gate's termination report): same field model, same error text, but a bad field falls
back to its default instead of failing the whole object.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
from collections.abc import Mapping
from typing import Any, Final, TypeVar, cast

from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.fields import META_KEY, RULES_KEY, FieldMeta, field_meta, json_name
from hyperframe.api.introspect import Shape, model_fields

__all__ = ["check", "dump", "expectation", "parse", "parse_lenient"]

T = TypeVar("T")


class _Invalid:
    """Marker for a value that failed to parse (its errors are already recorded)."""


_INVALID: Final = _Invalid()

_NO_META = FieldMeta(doc="")


def parse(cls: type[T], obj: Any, *, path: str) -> T:
    """Parse ``obj`` into ``cls``; raise :class:`SpecError` listing every problem found."""
    errors: list[FieldError] = []
    value = _parse_model(cls, obj, path, errors)
    if errors or isinstance(value, _Invalid):
        raise SpecError(errors or [FieldError(path, "invalid", "fix the errors above")])
    return cast(T, value)


Fallbacks = Mapping[type[Any], Mapping[str, Any]]
"""For lenient parsing: per model class, the value each field (by Python name) takes when it is
missing or wrong, in place of its dataclass default."""


def parse_lenient(
    cls: type[T], obj: Any, *, path: str = "", fallback: Fallbacks | None = None
) -> tuple[T | None, list[FieldError]]:
    """Parse ``obj`` forgivingly; return the value and every problem found (never raises).

    Unknown fields are ignored (a newer writer may add some); a field whose value is wrong takes
    its ``fallback`` or else its default; a list or map entry that is wrong is dropped. A missing
    required field is reported even when it has a fallback. The value is None only when a
    required field has neither a valid value nor a fallback.
    """
    errors: list[FieldError] = []
    value = _parse_model(cls, obj, path, errors, fallback or {})
    return (None if isinstance(value, _Invalid) else cast(T, value)), errors


def check(value: Any, *, path: str = "") -> list[FieldError]:
    """Every way the fields of ``value``, a model built in Python, break their declared rules.

    The same rules :func:`parse` applies to a wire object (shapes, bounds, formats, choices), for
    a model that validates itself in ``__post_init__``; its cross-field rules stay its own."""
    errors: list[FieldError] = []
    for f, shape in model_fields(type(value)):
        v = getattr(value, f.name)
        if v is not None or not shape.optional:
            _parse_value(shape, _meta_of(f), dump(v), _join(path, json_name(f)), errors)
    return errors


def dump(value: Any) -> Any:
    """A model (or any value inside one) as plain JSON-compatible data, wire names, no Nones."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f, _shape in model_fields(type(value)):
            v = getattr(value, f.name)
            if v is not None:
                out[json_name(f)] = dump(v)
        return out
    if isinstance(value, tuple | list):
        return [dump(v) for v in value]
    if isinstance(value, frozenset | set):
        return [dump(v) for v in sorted(value, key=str)]
    if isinstance(value, Mapping):
        return {str(k): dump(v) for k, v in value.items()}
    return value


def _describe(v: Any) -> str:
    if isinstance(v, bool):
        return f"boolean {str(v).lower()}"
    if isinstance(v, int):
        return f"integer {v}"
    if isinstance(v, float):
        return f"number {v}"
    if isinstance(v, str):
        return f'string "{v}"'
    if isinstance(v, list):
        return "a list"
    if isinstance(v, Mapping):
        return "an object"
    return type(v).__name__


def _num(x: float) -> str:
    """1e8 as 100000000, 0.5 as 0.5."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _bounds(meta: FieldMeta) -> str:
    parts = []
    if meta.minimum is not None:
        parts.append(f"{'>' if meta.exclusive_minimum else '>='} {_num(meta.minimum)}")
    if meta.maximum is not None:
        parts.append(f"{'<' if meta.exclusive_maximum else '<='} {_num(meta.maximum)}")
    return " and ".join(parts)


def expectation(shape: Shape, meta: FieldMeta) -> str:
    """A short phrase for what a field accepts, used in error fixes and in the docs."""
    kind = shape.kind
    if kind == "int":
        b = _bounds(meta)
        return f"an integer {b}".rstrip()
    if kind == "float":
        b = _bounds(meta)
        return f"a number {b}".rstrip()
    if kind == "bool":
        return "true or false"
    if kind == "enum":
        return "one of " + ", ".join(c or '""' for c in shape.choices)
    if kind == "str":
        if (fmt := meta.str_format) is not None:
            return f"{fmt.what}, e.g. {fmt.example}"
        return "a string"
    if kind == "list":
        return "a list"
    if kind == "map":
        return "a map of string to string"
    return "an object"


def _meta_of(f: dataclasses.Field[Any]) -> FieldMeta:
    """A declared field's metadata, a plain field's :func:`~hyperframe.api.fields.value_rules`, or none."""
    if META_KEY in f.metadata:
        return field_meta(f)
    rules = f.metadata.get(RULES_KEY)
    return rules if isinstance(rules, FieldMeta) else _NO_META


def _default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return _INVALID


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _parse_model(
    cls: type[Any],
    obj: Any,
    path: str,
    errors: list[FieldError],
    lenient: Fallbacks | None = None,
) -> Any:
    """``lenient`` is None for strict parsing, else the fallbacks of :func:`parse_lenient`."""
    if not isinstance(obj, Mapping):
        errors.append(
            FieldError(path, f"expected an object, got {_describe(obj)}", "write a mapping of fields")
        )
        return _INVALID
    ok = True
    known: list[str] = []
    kwargs: dict[str, Any] = {}
    fallback = {} if lenient is None else lenient.get(cls, {})
    for f, shape in model_fields(cls):
        name = json_name(f)
        known.append(name)
        sub = _join(path, name)
        raw = obj.get(name)
        meta = _meta_of(f)
        if raw is None:
            value = _default_of(f)
            if isinstance(value, _Invalid):
                errors.append(
                    FieldError(sub, "required field is missing", f"set it to {expectation(shape, meta)}")
                )
            if f.name in fallback:
                value = fallback[f.name]
        else:
            value = _parse_value(shape, meta, raw, sub, errors, lenient)
        if isinstance(value, _Invalid) and lenient is not None:
            value = fallback[f.name] if f.name in fallback else _default_of(f)
        if isinstance(value, _Invalid):
            ok = False
        else:
            kwargs[f.name] = value
    for key in () if lenient is not None else obj:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f'did you mean "{close[0]}"?' if close else "known fields: " + ", ".join(known)
            errors.append(
                FieldError(_join(path, str(key)), "unknown field", f"remove it or fix the spelling ({hint})")
            )
            ok = False
    if not ok:
        return _INVALID
    return cls(**kwargs)


def _parse_value(
    shape: Shape,
    meta: FieldMeta,
    v: Any,
    path: str,
    errors: list[FieldError],
    lenient: Fallbacks | None = None,
) -> Any:
    kind = shape.kind
    bad = len(errors)

    def fail(problem: str, fix: str | None = None) -> _Invalid:
        errors.append(FieldError(path, problem, fix or f"use {expectation(shape, meta)}"))
        return _INVALID

    if kind == "model":
        assert shape.model is not None  # guaranteed by shape_of
        return _parse_model(shape.model, v, path, errors, lenient)
    if kind == "raw":
        if not isinstance(v, Mapping):
            return fail(f"expected an object, got {_describe(v)}")
        for key in meta.raw_keys:
            if not isinstance(v.get(key), str) or not v.get(key):
                errors.append(FieldError(f"{path}.{key}", "required string field is missing", f"set {key}"))
        return copy.deepcopy(dict(v)) if len(errors) == bad else _INVALID
    if kind == "str":
        if meta.fmt == "quantity" and isinstance(v, int) and not isinstance(v, bool):
            v = str(v)
        if not isinstance(v, str):
            return fail(f"expected a string, got {_describe(v)}")
        if meta.min_length is not None and len(v) < meta.min_length:
            return fail(f"must not be shorter than {meta.min_length} characters", "set a non-empty value")
        if meta.max_length is not None and len(v) > meta.max_length:
            return fail(f"is {len(v)} characters, longer than {meta.max_length}", "shorten it")
        fmt = meta.str_format
        if fmt is not None and not fmt.matches(v):
            return fail(f'"{v}" is not {fmt.what}')
        return v
    if kind == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            return fail(f"expected an integer, got {_describe(v)}")
        return _check_bounds(v, meta, fail)
    if kind == "float":
        if isinstance(v, bool) or not isinstance(v, int | float):
            return fail(f"expected a number, got {_describe(v)}")
        if meta.finite and not math.isfinite(v):
            return fail(f"{v} is not a finite number", "use a finite number")
        return _check_bounds(float(v), meta, fail)
    if kind == "bool":
        if not isinstance(v, bool):
            return fail(f"expected true or false, got {_describe(v)}")
        return v
    if kind == "enum":
        if not isinstance(v, str) or v not in shape.choices:
            return fail(f"unknown value {_describe(v)}")
        return v if shape.enum_type is None else shape.enum_type(v)
    if kind == "map":
        if not isinstance(v, Mapping):
            return fail(f"expected a map, got {_describe(v)}")
        if meta.min_items is not None and len(v) < meta.min_items:
            return fail(
                f"has {len(v)} entries, fewer than {meta.min_items}", f"give at least {meta.min_items}"
            )
        if meta.max_items is not None and len(v) > meta.max_items:
            return fail(f"has {len(v)} entries, more than {meta.max_items}", f"give at most {meta.max_items}")
        assert shape.item is not None
        out: dict[str, Any] = {}
        for key, item in v.items():
            if meta.max_key_length is not None and not 1 <= len(str(key)) <= meta.max_key_length:
                fail(
                    f'key "{key!s:.70}" is {len(str(key))} characters',
                    f"use 1 to {meta.max_key_length} characters",
                )
                continue
            parsed = _parse_value(shape.item, meta.item(), item, f"{path}.{key}", errors, lenient)
            if not isinstance(parsed, _Invalid):
                out[str(key)] = parsed
        return out if lenient is not None or len(errors) == bad else _INVALID
    # list
    if not isinstance(v, list):
        return fail(f"expected a list, got {_describe(v)}")
    if shape.length is not None and len(v) != shape.length:
        return fail(f"has {len(v)} items, not {shape.length}", f"give exactly {shape.length}")
    if meta.min_items is not None and len(v) < meta.min_items:
        return fail(f"has {len(v)} items, fewer than {meta.min_items}", f"give at least {meta.min_items}")
    if meta.max_items is not None and len(v) > meta.max_items:
        return fail(f"has {len(v)} items, more than {meta.max_items}", f"give at most {meta.max_items}")
    assert shape.item is not None
    item_meta = meta.item()
    items = [
        _parse_value(shape.item, item_meta, item, f"{path}[{i}]", errors, lenient) for i, item in enumerate(v)
    ]
    if lenient is not None:
        items = [item for item in items if not isinstance(item, _Invalid)]
    elif len(errors) != bad:
        return _INVALID
    else:
        _check_unique(items, meta, path, errors)
    if len(errors) != bad and lenient is None:
        return _INVALID
    if shape.as_set:
        return frozenset(items)
    return list(items) if shape.as_list else tuple(items)


def _check_bounds(v: float, meta: FieldMeta, fail: Any) -> Any:
    low, high = meta.minimum, meta.maximum
    if low is not None and (v < low or (meta.exclusive_minimum and v == low)):
        word, op = ("not above", ">") if meta.exclusive_minimum else ("below", ">=")
        return fail(f"{_num(v)} is {word} the minimum {_num(low)}", f"use a value {op} {_num(low)}")
    if high is not None and (v > high or (meta.exclusive_maximum and v == high)):
        word, op = ("not below", "<") if meta.exclusive_maximum else ("above", "<=")
        return fail(f"{_num(v)} is {word} the maximum {_num(high)}", f"use a value {op} {_num(high)}")
    return v


def _check_unique(items: list[Any], meta: FieldMeta, path: str, errors: list[FieldError]) -> None:
    seen: dict[Any, int] = {}
    for i, item in enumerate(items):
        if meta.map_keys and isinstance(item, Mapping):
            key: Any = tuple(item.get(k) for k in meta.map_keys)
            label = ", ".join(f"{k}={item.get(k)}" for k in meta.map_keys)
        elif meta.map_keys:
            key = tuple(getattr(item, k, None) for k in meta.map_keys)
            if dataclasses.is_dataclass(item):
                names = {f.name: json_name(f) for f, _ in model_fields(type(item))}
                label = ", ".join(f"{names.get(k, k)}={getattr(item, k)}" for k in meta.map_keys)
            else:
                label = str(key)
        elif meta.unique_items:
            key, label = item, str(item)
        else:
            return
        if key in seen:
            errors.append(
                FieldError(
                    f"{path}[{i}]", f"duplicate entry ({label}) also at index {seen[key]}", "remove one"
                )
            )
        else:
            seen[key] = i
