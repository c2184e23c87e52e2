"""Load a HyperFrameJob and its HyperFrameRuntime from YAML files (for the CLI and local mode).

A file may hold several documents (the runtime and the job together, as the examples do).
The runtime is the one the job's ``spec.runtimeRef.name`` names.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.models import HyperFrameJob, HyperFrameRuntime, parse_job_and_runtime
from hyperframe.constants import JOB_KIND, RUNTIME_KIND

__all__ = ["add_job_file_arguments", "load_documents", "load_job_and_runtime", "select_job_and_runtime"]


def add_job_file_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``JOB.yaml [--runtime FILE ...]`` arguments shared by ``hyperframe render`` and ``local``."""
    parser.add_argument("job", help="YAML file with the HyperFrameJob (may also hold its HyperFrameRuntime)")
    parser.add_argument(
        "--runtime", action="append", default=[], metavar="FILE", help="YAML file(s) with runtimes"
    )


def load_documents(path: str | Path) -> list[dict[str, Any]]:
    """Every non-empty YAML document of a file; SpecError if it is not YAML objects."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(
            [FieldError(str(p), f"cannot read the file ({exc.strerror})", "check the path")]
        ) from exc
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise SpecError([FieldError(str(p), f"not valid YAML: {exc}", "fix the YAML syntax")]) from exc
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise SpecError(
                [FieldError(f"{p}[{i}]", "document is not a mapping", "write Kubernetes objects")]
            )
    return docs


def select_job_and_runtime(
    docs: Sequence[Mapping[str, Any]], runtime_docs: Iterable[Mapping[str, Any]] = ()
) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """Pick the one job and the runtime it references (unparsed objects)."""
    jobs = [d for d in docs if d.get("kind") == JOB_KIND]
    if len(jobs) != 1:
        raise SpecError(
            [FieldError("(input)", f"found {len(jobs)} {JOB_KIND} documents", f"give exactly one {JOB_KIND}")]
        )
    job = jobs[0]
    runtimes = [d for d in [*docs, *runtime_docs] if d.get("kind") == RUNTIME_KIND]
    spec = job.get("spec")
    ref = spec.get("runtimeRef") if isinstance(spec, Mapping) else None
    want = ref.get("name") if isinstance(ref, Mapping) else None
    if want is None:
        raise SpecError(
            [
                FieldError(
                    "spec.runtimeRef",
                    "required field is missing",
                    "set runtimeRef.name to a HyperFrameRuntime",
                )
            ]
        )
    named = [
        r for r in runtimes if isinstance(r.get("metadata"), Mapping) and r["metadata"].get("name") == want
    ]
    if not named:
        have = ", ".join(str((r.get("metadata") or {}).get("name")) for r in runtimes) or "none"
        raise SpecError(
            [
                FieldError(
                    "spec.runtimeRef.name",
                    f'HyperFrameRuntime "{want}" is not among the given documents (found: {have})',
                    "add it to the file or pass it with --runtime",
                )
            ]
        )
    return job, named[-1]


def load_job_and_runtime(
    job_path: str | Path, runtime_paths: Iterable[str | Path] = ()
) -> tuple[HyperFrameJob, HyperFrameRuntime]:
    """Load, select and parse; SpecError lists every problem of both objects."""
    docs = load_documents(job_path)
    extra = [d for p in runtime_paths for d in load_documents(p)]
    job_obj, runtime_obj = select_job_and_runtime(docs, extra)
    return parse_job_and_runtime(job_obj, runtime_obj)
