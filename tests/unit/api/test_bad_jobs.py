"""Every bad manifest of bad_jobs.yaml is rejected by the renderer, naming its field.

The same table is replayed against the real API server in tests/integration/test_crds.py, which
requires the same field paths from both: render evaluates the CRD's own CEL rules.
"""

from __future__ import annotations

from typing import Any

import pytest
from api_helpers import bad_case_objects, bad_jobs, patched
from hyperframe.api.errors import SpecError
from hyperframe.api.models import job_update_errors, parse_job
from hyperframe.render import RenderContext, render_job

CASES = bad_jobs()
RENDER_CASES = [c for c in CASES if "update" not in c]
UPDATE_CASES = [c for c in CASES if "update" in c]


def test_table_has_at_least_twelve_distinct_cases() -> None:
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names))
    server_checked = [c for c in CASES if not c.get("render_only")]
    assert len(server_checked) >= 12
    assert len({c["path"] for c in CASES}) >= 12


@pytest.mark.parametrize("case", RENDER_CASES, ids=[c["name"] for c in RENDER_CASES])
def test_render_rejects_naming_the_field(case: dict[str, Any]) -> None:
    job, runtime = bad_case_objects(case)
    with pytest.raises(SpecError) as info:
        render_job(job, runtime, RenderContext())
    paths = info.value.paths()
    assert case["path"] in paths, str(info.value)
    line = next(str(e) for e in info.value.errors if e.path == case["path"])
    # "path: problem: fix" with a non-empty problem and fix.
    path, problem, fix = line.split(": ", 2)
    assert path == case["path"] and problem and fix
    if "problem" in case:
        assert case["problem"] in problem


@pytest.mark.parametrize("case", RENDER_CASES, ids=[c["name"] for c in RENDER_CASES])
def test_unpatched_example_renders(case: dict[str, Any]) -> None:
    base = {k: v for k, v in case.items() if k not in ("job", "runtime")}
    job, runtime = bad_case_objects(base)
    assert render_job(job, runtime, RenderContext())


@pytest.mark.parametrize("case", UPDATE_CASES, ids=[c["name"] for c in UPDATE_CASES])
def test_update_is_refused_by_the_transition_rules(case: dict[str, Any]) -> None:
    # The CRD's own oldSelf rules, evaluated with the stored job as oldSelf.
    job, _runtime = bad_case_objects(case)
    parse_job(job)
    changed = patched(job, case["update"])
    assert job_update_errors(job, job) == []
    errors = job_update_errors(changed, job)
    assert case["path"] in [e.path for e in errors], errors
