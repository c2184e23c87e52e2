"""Map a field path of a rendered pod back to the job (or runtime) field it came from.

When the API server refuses a pod, its causes name pod paths (``spec.containers[0].volumeMounts[3]``);
the user wrote ``spec.volumeMounts[1]``. The renderer knows the layout it produced (HyperFrame's own
volumes, mounts and env come first), so it alone can translate; paths it did not take from the job
(``metadata.name``, the rendezvous env) map to None.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from hyperframe.api.job_rules import checkpoint_of
from hyperframe.constants import RUNTIME_KIND
from hyperframe.render.context import RenderContext
from hyperframe.render.pod import builtin_volumes_and_mounts, rendezvous_env
from hyperframe.render.prepare import Prepared, prepare

__all__ = ["job_field_of_pod_field", "job_field_of_prepared"]

_CONTAINER = r"spec\.(?:initContainers|containers)\[\d+\]"
_MOUNT = re.compile(rf"^{_CONTAINER}\.volumeMounts\[(\d+)\](.*)$")
_ENV = re.compile(rf"^{_CONTAINER}\.env\[(\d+)\](.*)$")
_VOLUME = re.compile(r"^spec\.volumes\[(\d+)\](.*)$")
_TOLERATION = re.compile(r"^spec\.tolerations(.*)$")
_NODE_SELECTOR = re.compile(r"^spec\.nodeSelector(.*)$")
_RUNTIME_POD: Final = f"{RUNTIME_KIND}.spec.pod"


def job_field_of_pod_field(
    job: Mapping[str, Any], runtime: Mapping[str, Any], pod_field: str, ctx: RenderContext
) -> str | None:
    """The job (or runtime) field a rendered pod's ``pod_field`` came from, or None."""
    return _map(prepare(job, runtime, ctx), pod_field)


def job_field_of_prepared(p: Prepared, pod_field: str) -> str | None:
    """:func:`job_field_of_pod_field` of an already prepared job."""
    return _map(p, pod_field)


def _map(p: Prepared, field: str) -> str | None:
    spec, pod = p.job.spec, p.resolution.pod
    builtin_volumes, builtin_mounts = builtin_volumes_and_mounts(p, pod)
    if m := _MOUNT.match(field):
        j = int(m.group(1)) - len(builtin_mounts)
        if 0 <= j < len(spec.volume_mounts):
            return f"spec.volumeMounts[{j}]{m.group(2)}"
        if j == len(spec.volume_mounts) and checkpoint_of(spec) is not None:
            return "spec.frames.checkpoint"  # the mount the renderer adds for the checkpoint volume
        return None
    if m := _VOLUME.match(field):
        j = int(m.group(1)) - len(builtin_volumes)
        return f"spec.volumes[{j}]{m.group(2)}" if 0 <= j < len(spec.volumes) else None
    if m := _ENV.match(field):
        return _env_field(p, int(m.group(1)) - len(rendezvous_env(p, 0)), m.group(2))
    ov = spec.runtime_overrides
    if m := _TOLERATION.match(field):
        base = (
            "spec.runtimeOverrides.tolerations"
            if ov.tolerations is not None
            else f"{_RUNTIME_POD}.tolerations"
        )
        return base + m.group(1)
    if field.startswith("metadata.labels") and spec.queue_name is not None:
        return "spec.queueName"  # the one label a job's own value fills in (Kueue's queue name)
    if m := _NODE_SELECTOR.match(field):
        base = (
            "spec.runtimeOverrides.nodeSelector"
            if ov.node_selector is not None
            else f"{_RUNTIME_POD}.nodeSelector"
        )
        return base + m.group(1)
    return None


def _env_field(p: Prepared, index: int, rest: str) -> str | None:
    """pod.env is the runtime's env with the job's overrides merged in by name, then spec.env."""
    env = p.resolution.pod.env
    if not 0 <= index < len(env):
        return None
    spec = p.job.spec
    merged = len(env) - len(spec.env)
    if index >= merged:
        return f"spec.env[{index - merged}]{rest}"
    name = env[index].name
    for k, var in enumerate(spec.runtime_overrides.env or ()):
        if var.name == name:
            return f"spec.runtimeOverrides.env[{k}]{rest}"
    for k, var in enumerate(p.runtime.spec.pod.env):
        if var.name == name:
            return f"{_RUNTIME_POD}.env[{k}]{rest}"
    return None
