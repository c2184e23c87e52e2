"""Shared helpers for API, render and CLI tests: example manifests and dict patches.

Imported by tests/integration/test_crds.py too, so the bad-manifest table is one file that
both the renderer and the real API server are checked against.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Final

import yaml

ROOT: Final = Path(__file__).resolve().parents[3]
EXAMPLES: Final = ROOT / "examples"
BAD_JOBS_FILE: Final = Path(__file__).with_name("bad_jobs.yaml")
DELETE: Final = "__delete__"


def example_docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text(encoding="utf-8")) if d]


def example_pair(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(job, runtime) objects of an example file."""
    docs = example_docs(name)
    job = next(d for d in docs if d["kind"] == "HyperFrameJob")
    runtime = next(d for d in docs if d["kind"] == "HyperFrameRuntime")
    return job, runtime


def example_files() -> list[str]:
    return sorted(p.name for p in EXAMPLES.glob("*.yaml"))


def patched(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``patch`` into a copy of ``obj``; the value ``__delete__`` removes a key."""
    out = copy.deepcopy(obj)
    _merge(out, patch)
    return out


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value == DELETE:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def bad_jobs() -> list[dict[str, Any]]:
    """The bad-manifest table: name, base example, job/runtime patches, the field path."""
    cases: list[dict[str, Any]] = yaml.safe_load(BAD_JOBS_FILE.read_text(encoding="utf-8"))
    return cases


def bad_case_objects(case: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    job, runtime = example_pair(case.get("example", "cpu-2node.yaml"))
    return patched(job, case.get("job", {})), patched(runtime, case.get("runtime", {}))
