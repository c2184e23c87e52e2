"""The pure renderer: (HyperFrameJob, HyperFrameRuntime, RenderContext) -> Kubernetes manifests.

No API calls. The operator creates each object with its own call (``render_service``,
``render_configmap``, ``render_pod``, ``render_podgroup``); ``render_job`` returns them all in
creation order, which is what ``hyperframe render`` prints. Every function raises
:class:`~hyperframe.api.errors.SpecError` listing every problem of the job and the runtime.

Every Service, ConfigMap and Pod is checked against the core/v1 schema of the pinned Kubernetes
version (:mod:`hyperframe.render.core_validation`) before it is returned, and each problem is
reported at the job's (or runtime's) field it came from, so a value passed through from the job
that the API server would refuse is refused here first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperframe.api.errors import FieldError, SpecError
from hyperframe.render.context import RenderContext
from hyperframe.render.core_validation import core_v1_errors
from hyperframe.render.field_map import job_field_of_prepared
from hyperframe.render.objects import configmap_object, podgroup_object, service_object
from hyperframe.render.pod import pod_object
from hyperframe.render.prepare import Prepared, prepare

__all__ = [
    "RenderContext",
    "render_configmap",
    "render_job",
    "render_pod",
    "render_podgroup",
    "render_pods",
    "render_service",
]

_DEFAULT_CTX = RenderContext()

Obj = Mapping[str, Any]


def _checked(p: Prepared, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``objects`` unchanged, or SpecError with each core/v1 problem at the job field it came from."""
    errors: list[FieldError] = []
    for obj in objects:
        for e in core_v1_errors(obj):
            job_field = job_field_of_prepared(p, e.path) if obj["kind"] == "Pod" else None
            where = job_field or f"{obj['kind']}/{obj['metadata']['name']}.{e.path}"
            found = FieldError(where, e.problem, e.fix)
            if found not in errors:  # every pod of the gang carries the same passed-through fields
                errors.append(found)
    if errors:
        raise SpecError(errors)
    return objects


def render_service(job: Obj, runtime: Obj, ctx: RenderContext = _DEFAULT_CTX) -> dict[str, Any]:
    """The headless Service (stable per-rank DNS, publishNotReadyAddresses)."""
    p = prepare(job, runtime, ctx)
    return _checked(p, [service_object(p)])[0]


def render_configmap(job: Obj, runtime: Obj, ctx: RenderContext = _DEFAULT_CTX) -> dict[str, Any]:
    """The ConfigMap holding the ResolvedJobConfig as ``job.json``."""
    p = prepare(job, runtime, ctx)
    return _checked(p, [configmap_object(p)])[0]


def render_podgroup(job: Obj, runtime: Obj, ctx: RenderContext = _DEFAULT_CTX) -> dict[str, Any] | None:
    """The PodGroup, or None when the runtime does not ask for one."""
    return podgroup_object(prepare(job, runtime, ctx))


def render_pod(job: Obj, runtime: Obj, rank: int, ctx: RenderContext = _DEFAULT_CTX) -> dict[str, Any]:
    """The pod of node rank ``rank`` (0-based) for ``ctx.gang_generation``."""
    p = prepare(job, runtime, ctx)
    return _checked(p, [pod_object(p, rank)])[0]


def render_pods(job: Obj, runtime: Obj, ctx: RenderContext = _DEFAULT_CTX) -> list[dict[str, Any]]:
    """Every pod of the gang, rank order."""
    p = prepare(job, runtime, ctx)
    return _checked(p, [pod_object(p, rank) for rank in range(p.resolution.config.nodes)])


def render_job(job: Obj, runtime: Obj, ctx: RenderContext = _DEFAULT_CTX) -> list[dict[str, Any]]:
    """All manifests in creation order: Service, ConfigMap, PodGroup (if any), pods."""
    p = prepare(job, runtime, ctx)
    objects = [service_object(p), configmap_object(p)]
    group = podgroup_object(p)
    if group is not None:
        objects.append(group)
    objects.extend(pod_object(p, rank) for rank in range(p.resolution.config.nodes))
    return _checked(p, objects)
