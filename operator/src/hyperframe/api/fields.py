"""Declarative field metadata shared by the parser, the OpenAPI generator and the docs.

A model is a frozen dataclass whose fields are declared with :func:`spec_field`. The same
declaration drives three consumers, so they cannot drift:

* :mod:`hyperframe.api.codec` parses plain dicts into the dataclasses and reports every error;
* :mod:`hyperframe.api.openapi` turns the dataclasses into the CRD's OpenAPI v3 schema;
* :mod:`hyperframe.api.docgen` writes the field reference in ``docs/api.md``.

Cross-field rules are :class:`Rule` objects: a CEL expression with its message, written once.
The API server enforces it from the CRD, and ``hyperframe render`` and the operator evaluate the
same generated schema (:mod:`hyperframe.api.schema_rules`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "FORMATS",
    "META_KEY",
    "FieldMeta",
    "Format",
    "Rule",
    "field_meta",
    "json_name",
    "rules_of",
    "spec_field",
    "value_rules",
]

META_KEY: Final = "hyperframe"
RULES_KEY: Final = "hyperframe.rules"


@dataclass(frozen=True, slots=True)
class Format:
    """A string format: one regex for both the schema ``pattern`` and the Python check."""

    pattern: str
    what: str
    """What a valid value is, e.g. ``a Kubernetes quantity``."""
    example: str
    """An example valid value, used in the fix text."""

    def matches(self, value: str) -> bool:
        return re.fullmatch(self.pattern, value) is not None


_QUANTITY = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"

FORMATS: Final[dict[str, Format]] = {
    "quantity": Format(_QUANTITY, "a Kubernetes quantity", "16Gi"),
    "image-digest": Format(
        r"^[a-z0-9]+([._/:-][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[a-f0-9]{64}$",
        "an image reference pinned by digest (repo@sha256:<64 hex>)",
        "registry.example.com/hyperframe/framework@sha256:" + "0" * 64,
    ),
    "dns-label": Format(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "a DNS-1123 label", "my-name"),
    "dns-subdomain": Format(
        r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        "a DNS-1123 subdomain",
        "my-name.example",
    ),
    "env-name": Format(r"^[A-Za-z_][A-Za-z0-9_]*$", "an environment variable name", "MY_VAR"),
    "resource-name": Format(
        r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
        "an extended resource name (domain/name)",
        "nvidia.com/gpu",
    ),
    "python-module": Format(
        r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_]*)?$",
        "a dotted Python module path, optionally with :function",
        "my_project.train:main",
    ),
    "python-module-name": Format(
        r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$",
        "a dotted Python module path (as for python -m)",
        "my_project.train",
    ),
    "python-function": Format(
        r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$",
        "module:function (a dotted module path, a colon and the function's name)",
        "my_project.model:build_model",
    ),
    "absolute-path": Format(r"^/.*$", "an absolute path", "/checkpoints"),
    "date-time": Format(
        r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$",
        "an RFC 3339 date-time",
        "2026-01-02T03:04:05Z",
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """A cross-field rule in CEL, with the text a violation prints as ``path: message: fix``.

    A rule that reads ``oldSelf`` is a transition rule: it runs on updates only.
    """

    cel: str
    message: str
    """Static message (used when no message_format)."""
    fix: str
    """How to fix a violation; appended to the message."""
    field_path: str = ""
    """Path of the offending field relative to the object, e.g. ``.parallelism``."""
    message_format: str | None = None
    """Optional message with the actual values, in CEL ``format`` syntax (%d, %s);
    ``message_args`` are the CEL expressions for the placeholders. (``format`` rather than
    string concatenation, because the API server's cost estimator rejects concatenated messages.)"""
    message_args: tuple[str, ...] = ()
    reason: str = "FieldValueInvalid"


def rules_of(cls: type[Any]) -> tuple[Rule, ...]:
    """The cross-field rules declared on a model class (``__rules__``)."""
    return tuple(getattr(cls, "__rules__", ()))


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldMeta:
    """Validation and documentation attached to one dataclass field."""

    doc: str
    json: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    """The value must be above ``minimum``, not equal to it (likewise ``exclusive_maximum``)."""
    exclusive_maximum: bool = False
    min_length: int | None = None
    max_length: int | None = None
    min_items: int | None = None
    max_items: int | None = None
    """Sizes of a list, or of a map (its entries)."""
    max_key_length: int | None = None
    """For maps: each key must be 1 to this many characters."""
    finite: bool = False
    """For numbers: NaN and the infinities are refused."""
    fmt: str | Format | None = None
    """A name in :data:`FORMATS`, or a :class:`Format` of the one model that uses it."""
    immutable: bool = False
    """Adds the CEL transition rule ``self == oldSelf``: the field cannot change after creation."""
    unique_items: bool = False
    """For lists of scalars: a set (``x-kubernetes-list-type: set``)."""
    map_keys: tuple[str, ...] = ()
    """For lists of objects keyed by these fields (``x-kubernetes-list-type: map``)."""
    raw_keys: tuple[str, ...] = ()
    """For free-form (pass-through) objects or lists of them: string keys that must be present."""
    example: str | None = None

    @property
    def str_format(self) -> Format | None:
        """The string format, resolved from its name."""
        return FORMATS[self.fmt] if isinstance(self.fmt, str) else self.fmt

    def item(self) -> FieldMeta:
        """What each item of a list or map field must satisfy (the value rules, not the sizes)."""
        return dataclasses.replace(
            self, doc="", json=None, immutable=False, min_length=None, min_items=None, max_items=None,
            unique_items=False, map_keys=(), max_key_length=None,
        )  # fmt: skip


def spec_field(
    doc: str,
    *,
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
    json: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
    min_length: int | None = None,
    max_length: int | None = None,
    min_items: int | None = None,
    max_items: int | None = None,
    fmt: str | Format | None = None,
    immutable: bool = False,
    unique_items: bool = False,
    map_keys: tuple[str, ...] = (),
    raw_keys: tuple[str, ...] = (),
    example: str | None = None,
) -> Any:
    """Declare a model field. Without a default the field is required."""
    if isinstance(fmt, str) and fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}")
    meta = FieldMeta(
        doc=doc,
        json=json,
        minimum=minimum,
        maximum=maximum,
        exclusive_minimum=exclusive_minimum,
        exclusive_maximum=exclusive_maximum,
        min_length=min_length,
        max_length=max_length,
        min_items=min_items,
        max_items=max_items,
        fmt=fmt,
        immutable=immutable,
        unique_items=unique_items,
        map_keys=map_keys,
        raw_keys=raw_keys,
        example=example,
    )
    md = {META_KEY: meta}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=md)
    return dataclasses.field(default=default, metadata=md)


def value_rules(**rules: Any) -> dict[str, FieldMeta]:
    """Metadata for a plain dataclass field (its doc is its docstring, its wire name its Python
    name unless ``json`` says otherwise) with value rules:
    ``field(default=1, metadata=value_rules(minimum=1))``. The codec applies them as it does those
    of a :func:`spec_field`; the CRD's schema and docs never see such a field."""
    return {RULES_KEY: FieldMeta(doc="", **rules)}


def field_meta(f: dataclasses.Field[Any]) -> FieldMeta:
    meta = f.metadata.get(META_KEY)
    if not isinstance(meta, FieldMeta):
        raise TypeError(f"field {f.name!r} was not declared with spec_field()")
    return meta


def json_name(f: dataclasses.Field[Any]) -> str:
    """The wire name: the declared one, else the snake_case name in camelCase.

    A plain dataclass field (no :func:`spec_field`) keeps its Python name: that is how the
    project's snake_case wire formats (the gate's report, the image matrix) are parsed by the
    same codec. The CRD's schema and docs accept only declared fields (:func:`field_meta`)."""
    if META_KEY not in f.metadata:
        rules = f.metadata.get(RULES_KEY)
        return rules.json if isinstance(rules, FieldMeta) and rules.json else f.name
    meta = field_meta(f)
    if meta.json:
        return meta.json
    head, *rest = f.name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
