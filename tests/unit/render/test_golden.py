"""Golden files: the full render of every example, byte for byte.

A change to the renderer shows up here as a readable YAML diff. After an intended change,
regenerate with ``HYPERFRAME_UPDATE_GOLDEN=1 pytest tests/unit/render/test_golden.py`` and
review the diff of tests/unit/render/golden/ before committing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from api_helpers import example_files, example_pair
from hyperframe.render import RenderContext, render_job
from hyperframe.render.yamlout import dump_manifests

GOLDEN = Path(__file__).with_name("golden")
UPDATE = os.environ.get("HYPERFRAME_UPDATE_GOLDEN") == "1"

# The operator's view: a stored job (uid), a later gang generation, an excluded node, progress URL.
OPERATOR_CTX = RenderContext(
    gang_generation=3,
    excluded_nodes=("gpu-node-7", "gpu-node-2"),
    status_url="https://hyperframe-operator.hyperframe-system.svc:8443/progress",
)
CASES = [(name, None) for name in example_files()] + [("gpu-pipeline.yaml", "operator")]


def _render(example: str, variant: str | None) -> str:
    job, runtime = example_pair(example)
    ctx = RenderContext()
    if variant == "operator":
        job["metadata"]["uid"] = "0b5c8f2e-1d2a-4c7e-9a55-3f1d2b6c7a90"
        ctx = OPERATOR_CTX
    return dump_manifests(render_job(job, runtime, ctx))


@pytest.mark.parametrize(("example", "variant"), CASES, ids=[f"{e}-{v or 'cli'}" for e, v in CASES])
def test_render_matches_golden(example: str, variant: str | None) -> None:
    golden = GOLDEN / f"{Path(example).stem}{'-' + variant if variant else ''}.yaml"
    text = _render(example, variant)
    if UPDATE:
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"missing {golden}: run with HYPERFRAME_UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8"), f"{golden.name} differs: review and regenerate"


def test_no_stale_golden_files() -> None:
    expected = {f"{Path(e).stem}{'-' + v if v else ''}.yaml" for e, v in CASES}
    assert {p.name for p in GOLDEN.glob("*.yaml")} == expected
