"""Write the field reference of docs/api.md from the models (``make generate``).

Only the part between the two marker lines is generated; the prose around it is hand-written.
tests/unit/api/test_docs.py regenerates it in memory and fails on any difference.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from hyperframe.api.codec import expectation
from hyperframe.api.fields import FieldMeta, field_meta, json_name, rules_of
from hyperframe.api.introspect import Shape, model_fields
from hyperframe.api.job import JobSpec
from hyperframe.api.resolved import ResolvedJobConfig
from hyperframe.api.runtime import RuntimeSpec
from hyperframe.api.status import JobStatus

__all__ = ["BEGIN", "END", "main", "reference", "update_document"]

BEGIN: Final = "<!-- BEGIN GENERATED REFERENCE (make generate) -->"
END: Final = "<!-- END GENERATED REFERENCE -->"

_ROOTS: Final[tuple[tuple[str, str, type[Any]], ...]] = (
    ("HyperFrameJob `spec`", "spec", JobSpec),
    ("HyperFrameJob `status`", "status", JobStatus),
    ("HyperFrameRuntime `spec`", "spec", RuntimeSpec),
    ("Resolved job config (`job.json`)", "job.json", ResolvedJobConfig),
)


def _type_name(shape: Shape) -> str:
    kind = shape.kind
    if kind == "model":
        assert shape.model is not None
        return "object"
    if kind == "list":
        assert shape.item is not None
        return f"list of {_type_name(shape.item)}"
    if kind == "map":
        assert shape.item is not None
        return f"map of {_type_name(shape.item)}"
    if kind == "raw":
        return "object (passed through)"
    if kind == "enum":
        return "enum"
    return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}[kind]


def _default(f: dataclasses.Field[Any], shape: Shape) -> str:
    if f.default is not dataclasses.MISSING:
        if f.default is None:
            return "-"
        if isinstance(f.default, tuple):
            return "`[" + ", ".join(str(v) for v in f.default) + "]`" if f.default else "`[]`"
        if isinstance(f.default, bool):
            return f"`{str(f.default).lower()}`"
        return f"`{f.default}`"
    if f.default_factory is not dataclasses.MISSING:
        return "`[]`" if isinstance(f.default_factory(), list | tuple) else "`{}`"
    return "**required**"


def _accepts(shape: Shape, meta: FieldMeta) -> str:
    parts = []
    inner = shape.item if shape.kind == "list" and shape.item is not None else shape
    if inner.kind in ("int", "float", "enum") or (inner.kind == "str" and meta.fmt):
        parts.append(expectation(inner, meta))
    if meta.immutable:
        parts.append("immutable after creation")
    if meta.max_items is not None and shape.kind == "list":
        parts.append(f"at most {meta.max_items} items")
    return "; ".join(parts)


def _section(title: str, path: str, cls: type[Any], out: list[str]) -> None:
    out.append(f"#### `{path}`" if title == "" else f"### {title}")
    doc = (cls.__doc__ or "").strip().splitlines()[0]
    out += ["", doc, "", "| Field | Type | Default | Accepts | Description |", "|---|---|---|---|---|"]
    nested: list[tuple[str, type[Any]]] = []
    for f, shape in model_fields(cls):
        meta = field_meta(f)
        name = json_name(f)
        desc = meta.doc.replace("|", "\\|")
        out.append(
            f"| `{name}` | {_type_name(shape)} | {_default(f, shape)} | {_accepts(shape, meta)} | {desc} |"
        )
        inner = shape.item if shape.kind == "list" and shape.item is not None else shape
        if inner.kind == "model" and inner.model is not None:
            nested.append((f"{path}.{name}{'[]' if shape.kind == 'list' else ''}", inner.model))
    rules = rules_of(cls)
    if rules:
        out += ["", "Rules (enforced by the API server and by `hyperframe render`):", ""]
        out += [f"- `{path}{r.field_path}`: {r.message}: {r.fix}." for r in rules]
    out.append("")
    for sub_path, sub_cls in nested:
        _section("", sub_path, sub_cls, out)


def reference() -> str:
    """The generated Markdown between the markers."""
    out: list[str] = []
    for title, path, cls in _ROOTS:
        _section(title, path, cls, out)
    return "\n".join(out).rstrip() + "\n"


def update_document(text: str) -> str:
    """``text`` with the generated part replaced; ValueError if the markers are missing."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the document needs the marker lines {BEGIN!r} and {END!r}")
    return text[: start + len(BEGIN)] + "\n\n" + reference() + "\n" + text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate the field reference in docs/api.md.")
    parser.add_argument("doc", type=Path)
    args = parser.parse_args(argv)
    text = args.doc.read_text(encoding="utf-8")
    args.doc.write_text(update_document(text), encoding="utf-8")
    print(f"updated {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
