"""Classify the type annotations of model dataclasses into a few shapes.

The parser, the schema generator and the docs generator all walk models through this one
classification, so a type the three disagree on cannot exist.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union

__all__ = ["Shape", "model_fields", "shape_of"]

Kind = Literal["str", "int", "float", "bool", "enum", "list", "map", "raw", "model"]


@dataclass(frozen=True, slots=True)
class Shape:
    """The shape of one annotation. ``optional`` means ``X | None``."""

    kind: Kind
    optional: bool = False
    item: Shape | None = None
    """Element shape for ``list`` and value shape for ``map``."""
    model: type[Any] | None = None
    choices: tuple[str, ...] = ()
    enum_type: type[enum.Enum] | None = None
    """For an ``Enum`` annotation: the class a parsed value becomes (``Literal`` stays a string)."""
    length: int | None = None
    """For a fixed-length ``tuple[X, X]``: the number of items."""
    as_list: bool = False
    """For ``list[X]``: parsed into a list (``tuple[X, ...]``, the models' form, parses to a tuple)."""
    as_set: bool = False
    """For ``frozenset[X]``: parsed into a frozenset (written as a list)."""


_SCALARS: dict[Any, Kind] = {str: "str", int: "int", float: "float", bool: "bool"}


def shape_of(tp: Any) -> Shape:
    """Classify a resolved annotation."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1 or len(args) != 2:
            raise TypeError(f"only X | None unions are supported, got {tp!r}")
        inner = shape_of(rest[0])
        return dataclasses.replace(inner, optional=True)
    if origin is Literal:
        return Shape("enum", choices=tuple(str(a) for a in args))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return Shape("list", item=shape_of(args[0]))
        if args and all(a == args[0] for a in args):
            return Shape("list", item=shape_of(args[0]), length=len(args))
        raise TypeError(f"only tuple[X, ...] and tuple[X, X] are supported, got {tp!r}")
    if origin is list:
        return Shape("list", item=shape_of(args[0]), as_list=True)
    if origin is frozenset:
        return Shape("list", item=shape_of(args[0]), as_set=True)
    if origin in (Mapping, dict, typing.Mapping):
        if args[1] is Any:
            return Shape("raw")
        return Shape("map", item=shape_of(args[1]))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return Shape("enum", choices=tuple(str(m.value) for m in tp), enum_type=tp)
    if tp in _SCALARS:
        return Shape(_SCALARS[tp])
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return Shape("model", model=tp)
    raise TypeError(f"unsupported annotation {tp!r}")


_FIELDS: dict[type[Any], tuple[tuple[dataclasses.Field[Any], Shape], ...]] = {}


def model_fields(cls: type[Any]) -> tuple[tuple[dataclasses.Field[Any], Shape], ...]:
    """The dataclass fields of a model with their shapes, in declaration order (cached)."""
    cached = _FIELDS.get(cls)
    if cached is None:
        hints = typing.get_type_hints(cls)
        cached = tuple((f, shape_of(hints[f.name])) for f in dataclasses.fields(cls))
        _FIELDS[cls] = cached
    return cached
