"""docs/api.md's field reference is generated from the models and must not drift."""

from __future__ import annotations

from pathlib import Path

import pytest
from api_helpers import ROOT, bad_jobs
from hyperframe.api.docgen import BEGIN, END, main, reference, update_document
from hyperframe.api.fields import json_name
from hyperframe.api.introspect import model_fields
from hyperframe.api.job import JobSpec

DOC = ROOT / "docs" / "api.md"


def test_reference_is_up_to_date() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert update_document(text) == text, "docs/api.md is stale: run `make generate`"


def test_reference_lists_every_spec_field_and_rule() -> None:
    ref = reference()
    for f, _ in model_fields(JobSpec):
        assert f"| `{json_name(f)}` |" in ref
    assert "pipeline x data must equal nodes x ranks per node" in ref
    assert "#### `spec.frames.checkpoint`" in ref and "#### `spec.env[]`" in ref


def test_prose_claims_match_the_code() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert f"There are {len(bad_jobs())} of them." in " ".join(text.split())


def test_markers_are_required(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="marker"):
        update_document("no markers")
    doc = tmp_path / "api.md"
    doc.write_text(f"intro\n{BEGIN}\nSTALE-LINE\n{END}\noutro\n")
    assert main([str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith(f"{END}\noutro\n") and "STALE-LINE" not in text
