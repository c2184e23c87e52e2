"""Run a CRD schema's ``x-kubernetes-validations`` on an object, the way the API server does.

Before validating, the API server defaults the object from the schema's ``default`` values and
reads it typed by the schema (an integer written where the schema says ``number`` is a double in
CEL). :func:`prepare` does both. :func:`check_rules` then walks the schema and the object
together and evaluates every rule at its node, with ``self`` bound to the value there and
``oldSelf`` to the old object's value at the same node. A rule that reads ``oldSelf`` (a
transition rule) runs only when an old object is given, as on the API server's updates.

A violated rule is reported at its node's path plus its ``fieldPath``, with its
``messageExpression`` (or ``message``) split into ``problem: fix`` at the last ``": "``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from hyperframe.api.cel import CelError, evaluate_many
from hyperframe.api.errors import FieldError

__all__ = ["check_rules", "prepare"]

_OLD_SELF: Final = re.compile(r"\boldSelf\b")
_MAP_KEY: Final = re.compile(r"\['([^']*)'\]")


def prepare(schema: Mapping[str, Any], value: Any) -> Any:
    """A copy of ``value`` with the schema's defaults applied and numbers typed by the schema."""
    if isinstance(value, Mapping):
        out = {str(k): v for k, v in value.items()}
        props: Mapping[str, Any] = schema.get("properties", {})
        for name, sub in props.items():
            if name not in out and "default" in sub:
                out[name] = copy.deepcopy(sub["default"])
        for name, v in list(out.items()):
            if name in props:
                out[name] = prepare(props[name], v)
            elif isinstance(schema.get("additionalProperties"), Mapping):
                out[name] = prepare(schema["additionalProperties"], v)
        return out
    if isinstance(value, list | tuple):
        items = schema.get("items")
        return [prepare(items, v) if isinstance(items, Mapping) else v for v in value]
    if schema.get("type") == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def check_rules(
    schema: Mapping[str, Any],
    value: Any,
    path: str,
    *,
    old: Any = None,
    known_errors: Iterable[FieldError] = (),
) -> list[FieldError]:
    """Every rule of ``schema`` that ``value`` (already :func:`prepare`\\ d) violates.

    ``known_errors`` are the structural errors already found: a rule that cannot be evaluated
    (it reads a missing or mistyped field) under one of their paths is not reported again.
    """
    errors: list[FieldError] = []
    _walk(schema, value, old, path, tuple(e.path for e in known_errors), errors)
    return errors


def _walk(
    schema: Mapping[str, Any], value: Any, old: Any, path: str, known: tuple[str, ...], out: list[FieldError]
) -> None:
    if value is None:
        return
    rules: list[Mapping[str, Any]] = list(schema.get("x-kubernetes-validations", ()))
    if rules:
        _check_node(rules, value, old, path, known, out)
    if isinstance(value, Mapping):
        props: Mapping[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for name, v in value.items():
            sub = props.get(name, extra if isinstance(extra, Mapping) else None)
            if sub is not None:
                sub_old = old.get(name) if isinstance(old, Mapping) else None
                _walk(sub, v, sub_old, _join(path, name), known, out)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, v in enumerate(value):
            # Old list items correlate only through list-map keys; without them no transition rule.
            _walk(schema["items"], v, None, f"{path}[{i}]", known, out)


def _check_node(
    rules: list[Mapping[str, Any]],
    value: Any,
    old: Any,
    path: str,
    known: tuple[str, ...],
    out: list[FieldError],
) -> None:
    live = [r for r in rules if old is not None or not _OLD_SELF.search(str(r["rule"]))]
    if not live:
        return
    variables = {"self": value} if old is None else {"self": value, "oldSelf": old}
    verdicts = evaluate_many([str(r["rule"]) for r in live], variables)
    failed = [(r, v) for r, v in zip(live, verdicts, strict=True) if v is not True]
    if not failed:
        return
    messages = evaluate_many([str(r.get("messageExpression", "''")) for r, _ in failed], variables)
    for (rule, verdict), message in zip(failed, messages, strict=True):
        where = _join(path, _field_path(str(rule.get("fieldPath", ""))))
        if isinstance(verdict, CelError):
            if _under(path, known):
                continue  # the structural error already reported is the cause
            out.append(
                FieldError(
                    where,
                    f"rule {rule['rule']} could not be evaluated ({verdict})",
                    "fix the fields it reads",
                )
            )
            continue
        text = message if isinstance(message, str) and message else str(rule.get("message", ""))
        problem, sep, fix = text.rpartition(": ")
        out.append(
            FieldError(where, problem, fix) if sep else FieldError(where, text, f"make {rule['rule']} hold")
        )


def _field_path(field_path: str) -> str:
    """``.a['b.c']`` as the project writes paths: ``a[b.c]``."""
    return _MAP_KEY.sub(r"[\1]", field_path).lstrip(".")


def _join(path: str, name: str) -> str:
    if not name:
        return path
    if not path or name.startswith("["):
        return f"{path}{name}"
    return f"{path}.{name}"


def _under(path: str, known: tuple[str, ...]) -> bool:
    return any(p == path or p.startswith((f"{path}.", f"{path}[")) or not path for p in known)
