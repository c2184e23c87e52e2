"""The two HyperFrame kinds as frozen dataclasses, parsed from plain dicts.

``parse_job`` / ``parse_runtime`` accept the whole Kubernetes object (as kubectl, kopf or a YAML
file give it), apply the same defaults as the CRD schema, and raise
:class:`~hyperframe.api.errors.SpecError` with *every* problem, each naming its field path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from hyperframe.api.codec import parse
from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.job import MAX_JOB_NAME_LENGTH, JobSpec
from hyperframe.api.runtime import RuntimeSpec
from hyperframe.constants import API_VERSION, JOB_KIND, RUNTIME_KIND

__all__ = [
    "HyperFrameJob",
    "HyperFrameRuntime",
    "ObjectMeta",
    "parse_job",
    "parse_job_and_runtime",
    "parse_runtime",
]

# The job name is also the headless Service name, so it must be a DNS-1035 label.
JOB_NAME_PATTERN: Final = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
RUNTIME_NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectMeta:
    """The metadata fields HyperFrame uses."""

    name: str
    namespace: str | None = None
    uid: str | None = None
    """Absent for objects not (yet) stored by the API server, e.g. in ``hyperframe render``."""
    generation: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class HyperFrameJob:
    metadata: ObjectMeta
    spec: JobSpec
    status: Mapping[str, Any] = field(default_factory=dict)
    """As stored; the operator owns it and reads it as a plain mapping."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HyperFrameRuntime:
    metadata: ObjectMeta
    spec: RuntimeSpec


def _check_type(obj: Mapping[str, Any], kind: str, errors: list[FieldError]) -> None:
    if obj.get("apiVersion") != API_VERSION:
        errors.append(
            FieldError(
                "apiVersion",
                f'expected "{API_VERSION}", got {obj.get("apiVersion")!r}',
                f"set apiVersion: {API_VERSION}",
            )
        )
    if obj.get("kind") != kind:
        errors.append(FieldError("kind", f'expected "{kind}", got {obj.get("kind")!r}', f"set kind: {kind}"))


def _parse_meta(
    obj: Mapping[str, Any], pattern: str, max_len: int, errors: list[FieldError]
) -> ObjectMeta | None:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        errors.append(FieldError("metadata", "missing", "add metadata with a name"))
        return None
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        errors.append(FieldError("metadata.name", "missing", "give the object a name"))
        return None
    ok = True
    if len(name) > max_len:
        errors.append(
            FieldError(
                "metadata.name",
                f"{name!r} is {len(name)} characters; rendered pod names and hostnames add a generation and "
                f"rank suffix and must stay within 63",
                f"use a name of at most {max_len} characters",
            )
        )
        ok = False
    if not re.fullmatch(pattern, name):
        errors.append(
            FieldError(
                "metadata.name",
                f"{name!r} is not a DNS label",
                "use lower-case letters, digits and '-', starting with a letter and ending with a letter or digit",
            )
        )
        ok = False
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    generation = meta.get("generation")
    if not ok:
        return None
    return ObjectMeta(
        name=name,
        namespace=meta.get("namespace") or None,
        uid=meta.get("uid") or None,
        generation=generation if isinstance(generation, int) else None,
        labels={str(k): str(v) for k, v in labels.items()},
        annotations={str(k): str(v) for k, v in annotations.items()},
    )


def parse_job(obj: Any) -> HyperFrameJob:
    """Parse and validate a whole HyperFrameJob object (``spec`` defaults applied)."""
    if not isinstance(obj, Mapping):
        raise SpecError(
            [FieldError("(document)", "expected a HyperFrameJob object", f"write a {JOB_KIND} manifest")]
        )
    errors: list[FieldError] = []
    _check_type(obj, JOB_KIND, errors)
    meta = _parse_meta(obj, JOB_NAME_PATTERN, MAX_JOB_NAME_LENGTH, errors)
    spec: JobSpec | None = None
    try:
        spec = parse(JobSpec, obj.get("spec"), path="spec")
    except SpecError as exc:
        errors.extend(exc.errors)
    if errors or meta is None or spec is None:
        raise SpecError(errors)
    status = obj.get("status")
    return HyperFrameJob(metadata=meta, spec=spec, status=dict(status) if isinstance(status, Mapping) else {})


def parse_runtime(obj: Any) -> HyperFrameRuntime:
    """Parse and validate a whole HyperFrameRuntime object (``spec`` defaults applied)."""
    if not isinstance(obj, Mapping):
        raise SpecError(
            [
                FieldError(
                    "(document)", "expected a HyperFrameRuntime object", f"write a {RUNTIME_KIND} manifest"
                )
            ]
        )
    errors: list[FieldError] = []
    _check_type(obj, RUNTIME_KIND, errors)
    meta = _parse_meta(obj, RUNTIME_NAME_PATTERN, 253, errors)
    spec: RuntimeSpec | None = None
    try:
        spec = parse(RuntimeSpec, obj.get("spec"), path="spec")
    except SpecError as exc:
        errors.extend(exc.errors)
    if errors or meta is None or spec is None:
        raise SpecError(errors)
    return HyperFrameRuntime(metadata=meta, spec=spec)


def parse_job_and_runtime(job_obj: Any, runtime_obj: Any) -> tuple[HyperFrameJob, HyperFrameRuntime]:
    """Parse both objects; one SpecError lists every problem of both (runtime paths prefixed)."""
    errors: list[FieldError] = []
    job = runtime = None
    try:
        job = parse_job(job_obj)
    except SpecError as exc:
        errors.extend(exc.errors)
    try:
        runtime = parse_runtime(runtime_obj)
    except SpecError as exc:
        errors.extend(FieldError(f"{RUNTIME_KIND}.{e.path}", e.problem, e.fix) for e in exc.errors)
    if errors or job is None or runtime is None:
        raise SpecError(errors)
    return job, runtime
