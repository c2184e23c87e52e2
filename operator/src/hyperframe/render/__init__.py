"""The pure renderer: (HyperFrameJob, HyperFrameRuntime, RenderContext) -> Kubernetes manifests.

No API calls. The operator creates each object with its own call (``render_service``,
``render_configmap``, ``render_pod``, ``render_podgroup``); ``render_job`` returns them all in
creation order, which is what ``hyperframe render`` prints. Every function raises
:class:`~hyperframe.api.errors.SpecError` listing every problem of the job and the runtime.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperframe.render.context import RenderContext
from hyperframe.render.objects import configmap_object, podgroup_object, service_object
from hyperframe.render.pod import pod_object
from hyperframe.render.prepare import prepare

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


def render_service(job: Obj, runtime: Obj, ctx: RenderContext = _DEFAULT_CTX) -> dict[str, Any]:
    """The headless Service (stable per-rank DNS, publishNotReadyAddresses)."""
    return service_object(prepare(job, runtime, ctx))


def render_configmap(job: Obj, runtime: Obj, ctx: RenderContext = _DEFAULT_CTX) -> dict[str, Any]:
    """The ConfigMap holding the ResolvedJobConfig as ``job.json``."""
    return configmap_object(prepare(job, runtime, ctx))


def render_podgroup(job: Obj, runtime: Obj, ctx: RenderContext = _DEFAULT_CTX) -> dict[str, Any] | None:
    """The PodGroup, or None when the runtime does not ask for one."""
    return podgroup_object(prepare(job, runtime, ctx))


def render_pod(job: Obj, runtime: Obj, rank: int, ctx: RenderContext = _DEFAULT_CTX) -> dict[str, Any]:
    """The pod of node rank ``rank`` (0-based) for ``ctx.gang_generation``."""
    return pod_object(prepare(job, runtime, ctx), rank)


def render_pods(job: Obj, runtime: Obj, ctx: RenderContext = _DEFAULT_CTX) -> list[dict[str, Any]]:
    """Every pod of the gang, rank order."""
    p = prepare(job, runtime, ctx)
    return [pod_object(p, rank) for rank in range(p.resolution.config.nodes)]


def render_job(job: Obj, runtime: Obj, ctx: RenderContext = _DEFAULT_CTX) -> list[dict[str, Any]]:
    """All manifests in creation order: Service, ConfigMap, PodGroup (if any), pods."""
    p = prepare(job, runtime, ctx)
    objects = [service_object(p), configmap_object(p)]
    group = podgroup_object(p)
    if group is not None:
        objects.append(group)
    objects.extend(pod_object(p, rank) for rank in range(p.resolution.config.nodes))
    return objects
