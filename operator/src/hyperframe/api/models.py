"""The two HyperFrame kinds as frozen dataclasses, parsed from plain dicts.

``parse_job`` / ``parse_runtime`` accept the whole Kubernetes object (as kubectl, kopf or a YAML
file give it), apply the same defaults as the CRD schema, evaluate the CRD's own CEL rules
(:mod:`hyperframe.api.schema_rules`) and raise :class:`~hyperframe.api.errors.SpecError` with
*every* problem, each naming its field path.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from hyperframe.api.codec import parse
from hyperframe.api.crd import job_crd, runtime_crd
from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.job import JobSpec
from hyperframe.api.runtime import RuntimeSpec
from hyperframe.api.schema_rules import check_rules, prepare
from hyperframe.constants import API_VERSION, JOB_KIND, RUNTIME_KIND

__all__ = [
    "HyperFrameJob",
    "HyperFrameRuntime",
    "ObjectMeta",
    "job_update_errors",
    "parse_job",
    "parse_job_and_runtime",
    "parse_runtime",
]

# The API server's own check of a cluster-scoped object's name (a DNS-1123 subdomain); the job's
# name has CEL rules in the CRD instead (hyperframe.api.crd.JOB_NAME_RULES).
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


def _parse_meta(obj: Mapping[str, Any], pattern: str | None, errors: list[FieldError]) -> ObjectMeta | None:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        errors.append(FieldError("metadata", "missing", "add metadata with a name"))
        return None
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        errors.append(FieldError("metadata.name", "missing", "give the object a name"))
        return None
    if pattern is not None and (len(name) > 253 or not re.fullmatch(pattern, name)):
        errors.append(
            FieldError(
                "metadata.name",
                f"{name!r} is not a DNS-1123 subdomain",
                "use at most 253 lower-case letters, digits, '-' and '.', starting and ending with a letter or digit",
            )
        )
        return None
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    generation = meta.get("generation")
    return ObjectMeta(
        name=name,
        namespace=meta.get("namespace") or None,
        uid=meta.get("uid") or None,
        generation=generation if isinstance(generation, int) else None,
        labels={str(k): str(v) for k, v in labels.items()},
        annotations={str(k): str(v) for k, v in annotations.items()},
    )


@functools.cache
def _schema(kind: str) -> Mapping[str, Any]:
    crd = job_crd() if kind == JOB_KIND else runtime_crd()
    schema: Mapping[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _rule_errors(
    kind: str, obj: Mapping[str, Any], known: list[FieldError], old: Mapping[str, Any] | None = None
) -> list[FieldError]:
    """The CRD's CEL rules on metadata and spec, as the API server evaluates them on a create
    (or, given the stored object ``old``, on an update: with the transition rules)."""
    schema = _schema(kind)

    def checked(o: Mapping[str, Any]) -> Any:
        return prepare(schema, {"metadata": o.get("metadata"), "spec": o.get("spec")})

    return check_rules(
        schema, checked(obj), "", old=None if old is None else checked(old), known_errors=known
    )


def job_update_errors(obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """Every problem of ``obj`` as an update of the stored job ``old`` (immutable fields too)."""
    try:
        parse_job(obj)
    except SpecError as exc:
        return exc.errors
    return _rule_errors(JOB_KIND, obj, [], old)


def parse_job(obj: Any) -> HyperFrameJob:
    """Parse and validate a whole HyperFrameJob object (``spec`` defaults applied)."""
    if not isinstance(obj, Mapping):
        raise SpecError(
            [FieldError("(document)", "expected a HyperFrameJob object", f"write a {JOB_KIND} manifest")]
        )
    errors: list[FieldError] = []
    _check_type(obj, JOB_KIND, errors)
    meta = _parse_meta(obj, None, errors)
    spec: JobSpec | None = None
    try:
        spec = parse(JobSpec, obj.get("spec"), path="spec")
    except SpecError as exc:
        errors.extend(exc.errors)
    errors.extend(_rule_errors(JOB_KIND, obj, errors))
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
    meta = _parse_meta(obj, RUNTIME_NAME_PATTERN, errors)
    spec: RuntimeSpec | None = None
    try:
        spec = parse(RuntimeSpec, obj.get("spec"), path="spec")
    except SpecError as exc:
        errors.extend(exc.errors)
    errors.extend(_rule_errors(RUNTIME_KIND, obj, errors))
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
