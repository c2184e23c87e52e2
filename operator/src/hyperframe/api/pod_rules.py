"""Kubernetes' pod validation, for the fields a job passes through to its pods.

Volumes, mounts, env sources, tolerations and node selectors reach the pod unchanged, so a
mistake in them used to surface only when the API server refused the pod (HTTP 422, naming pod
paths such as ``spec.containers[0].volumeMounts[3]``). These checks are the rules of
``k8s.io/kubernetes/pkg/apis/core/validation`` (``ValidateVolumes``, ``ValidateVolumeMounts``,
``validateEnvVarValueFrom``, ``ValidateTolerations``, ``ValidateNodeSelector`` and the label
rules of apimachinery) that can fail on those fields, reported against the job's own field paths,
so ``hyperframe render`` and the operator refuse such a job before any object is created.

A field that comes from the HyperFrameRuntime (no job override) is reported with the runtime's
path, ``HyperFrameRuntime.spec.pod...``, as :func:`~hyperframe.api.models.parse_job_and_runtime`
does. The operator still maps any refusal the API server makes to the job's paths
(:mod:`hyperframe.render.field_map`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from hyperframe.api.errors import FieldError
from hyperframe.api.job import JobSpec
from hyperframe.api.kube import EnvVar, Toleration, VolumeMount
from hyperframe.api.runtime import RuntimeSpec
from hyperframe.constants import RUNTIME_KIND

__all__ = ["LABEL_VALUE_MAX", "VOLUME_SOURCES", "pod_field_errors"]

LABEL_VALUE_MAX: Final = 63
_NAME_PART = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = rf"{_DNS_LABEL}(\.{_DNS_LABEL})*"
_CONFIG_KEY = r"[-._a-zA-Z0-9]+"

# core/v1 VolumeSource: exactly one of these per volume.
VOLUME_SOURCES: Final = frozenset(
    {
        "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret",
        "nfs", "iscsi", "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder",
        "cephfs", "flocker", "downwardAPI", "fc", "azureFile", "configMap", "vsphereVolume",
        "quobyte", "azureDisk", "photonPersistentDisk", "projected", "portworxVolume", "scaleIO",
        "storageos", "csi", "ephemeral", "image",
    }
)  # fmt: skip
# Names the validation requires although the schema does not mark them required (the schema's
# required fields, types, enums and unknown fields are render's core/v1 check).
_SOURCE_REQUIRED: Final[Mapping[str, str]] = {"configMap": "name", "secret": "secretName"}
_ENV_SOURCES: Final = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef", "fileKeyRef")
# validation.validEnvDownwardAPIFieldPathExpressions (labels/annotations are checked by pattern).
_ENV_FIELD_PATHS: Final = frozenset(
    {
        "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
        "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
    }
)  # fmt: skip
_ENV_META_PATH = re.compile(r"^metadata\.(labels|annotations)\['[^']+'\]$")
# validation.validContainerResourceFieldPathPrefixes / exact names
_ENV_RESOURCES: Final = frozenset(
    {
        "limits.cpu", "limits.memory", "limits.ephemeral-storage",
        "requests.cpu", "requests.memory", "requests.ephemeral-storage",
    }
)  # fmt: skip
_ENV_RESOURCE_PREFIXES: Final = ("limits.hugepages-", "requests.hugepages-")


def _matches(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None


def qualified_name_problem(key: str) -> str | None:
    """apimachinery IsQualifiedName: ``[prefix/]name``, name <= 63 chars, prefix a DNS subdomain."""
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return f'"{key}" has more than one "/"'
    if prefix and (len(prefix) > 253 or not _matches(_DNS_SUBDOMAIN, prefix)):
        return f'the prefix of "{key}" is not a DNS subdomain'
    if not name or len(name) > LABEL_VALUE_MAX or not _matches(_NAME_PART, name):
        return (
            f'"{key}" is not a qualified name (at most 63 letters, digits, "-", "_" or ".", '
            "starting and ending with a letter or digit, optionally prefixed by a DNS subdomain and /)"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """apimachinery IsValidLabelValue: empty, or <= 63 chars of the name alphabet."""
    if value == "" or (len(value) <= LABEL_VALUE_MAX and _matches(_NAME_PART, value)):
        return None
    return (
        f'"{value:.80}" is not a valid label value (at most 63 letters, digits, "-", "_" or ".", '
        "starting and ending with a letter or digit)"
    )


def _relative_path_problem(path: str) -> str | None:
    """validation.validateLocalDescendingPath: relative, no '..' element."""
    if path.startswith("/"):
        return f"{path} is an absolute path"
    if ".." in path.split("/"):
        return f"{path} contains '..'"
    return None


# -- volumes and mounts ---------------------------------------------------------------------------


def _volume_errors(volumes: Sequence[Mapping[str, Any]]) -> Iterator[FieldError]:
    for i, volume in enumerate(volumes):
        path = f"spec.volumes[{i}]"
        name = str(volume.get("name", ""))
        if not _matches(_DNS_LABEL, name) or len(name) > LABEL_VALUE_MAX:
            yield FieldError(
                f"{path}.name", f'"{name}" is not a DNS-1123 label', "use lower-case letters, digits and -"
            )
        keys = [k for k in volume if k != "name"]
        unknown = [k for k in keys if k not in VOLUME_SOURCES]  # the core/v1 check names them
        sources = [k for k in keys if k in VOLUME_SOURCES]
        if not sources and not unknown:
            yield FieldError(
                path,
                "no volume source",
                "set exactly one source, e.g. persistentVolumeClaim: {claimName: data}",
            )
        elif len(sources) > 1:
            yield FieldError(
                path, f"{len(sources)} volume sources ({', '.join(sources)})", "keep exactly one"
            )
        for source in sources:
            yield from _source_errors(f"{path}.{source}", source, volume.get(source))


def _source_errors(path: str, source: str, body: object) -> Iterator[FieldError]:
    if not isinstance(body, Mapping):
        return  # the core/v1 check reports the type
    required = _SOURCE_REQUIRED.get(source)
    if required and not body.get(required):
        yield FieldError(f"{path}.{required}", "missing", f"set {required}")
    if source == "hostPath" and body.get("path") and not str(body["path"]).startswith("/"):
        yield FieldError(
            f"{path}.path", f"{body['path']} is not an absolute path", "use a path starting with /"
        )
    for j, item in enumerate(body.get("items") or ()):
        if not isinstance(item, Mapping) or not item.get("path"):
            continue  # a missing path is the core/v1 check's
        problem = _relative_path_problem(str(item["path"]))
        if problem:
            yield FieldError(
                f"{path}.items[{j}].path", problem, "use a relative path inside the volume, without .."
            )


def _mount_errors(mounts: Sequence[VolumeMount], builtin_paths: Sequence[str]) -> Iterator[FieldError]:
    seen: dict[str, int] = {}
    for i, mount in enumerate(mounts):
        path = f"spec.volumeMounts[{i}]"
        earlier = seen.get(mount.mount_path)
        if earlier is not None:
            yield FieldError(
                f"{path}.mountPath",
                f"{mount.mount_path} is already mounted by spec.volumeMounts[{earlier}]",
                "mount each path once (use subPath to mount parts of one volume at several paths)",
            )
        elif mount.mount_path not in builtin_paths:
            seen[mount.mount_path] = i
        if mount.sub_path:
            problem = _relative_path_problem(mount.sub_path)
            if problem:
                yield FieldError(
                    f"{path}.subPath", problem, "use a relative path inside the volume, without .."
                )


# -- env, tolerations, node selectors --------------------------------------------------------------


def _env_errors(path: str, env: Sequence[EnvVar]) -> Iterator[FieldError]:
    for i, var in enumerate(env):
        source = var.value_from
        if source is None:
            continue
        here = f"{path}[{i}].valueFrom"
        unknown = [k for k in source if k not in _ENV_SOURCES]  # the core/v1 check names them
        kinds = [k for k in source if k in _ENV_SOURCES]
        if len(kinds) != 1 and not unknown:
            yield FieldError(
                here,
                f"{len(kinds)} sources ({', '.join(kinds) or 'none'})",
                "set exactly one of " + ", ".join(_ENV_SOURCES),
            )
        for kind in kinds:
            body = source.get(kind)
            if isinstance(body, Mapping):  # a wrong type is the core/v1 schema check's to report
                yield from _env_source_errors(f"{here}.{kind}", kind, body)


def _env_source_errors(path: str, kind: str, body: Mapping[str, Any]) -> Iterator[FieldError]:
    if kind in ("configMapKeyRef", "secretKeyRef"):
        what = "ConfigMap" if kind == "configMapKeyRef" else "Secret"
        name, key = str(body.get("name") or ""), str(body.get("key") or "")
        if not name:
            yield FieldError(f"{path}.name", "missing", f"name the {what}")
        elif not _matches(_DNS_SUBDOMAIN, name):
            yield FieldError(
                f"{path}.name", f'"{name}" is not a DNS-1123 subdomain', f"use the {what}'s name"
            )
        if key and not _matches(_CONFIG_KEY, key):  # a missing key is the core/v1 check's
            yield FieldError(f"{path}.key", f'"{key}" is not a valid key', "use letters, digits, -, _ and .")
    elif kind == "fieldRef":
        field_path = str(body.get("fieldPath") or "")
        if field_path not in _ENV_FIELD_PATHS and not _ENV_META_PATH.match(field_path):
            yield FieldError(
                f"{path}.fieldPath",
                f'"{field_path}" is not a field the downward API exposes to env',
                "use one of "
                + ", ".join(sorted(_ENV_FIELD_PATHS))
                + ", metadata.labels['k'], metadata.annotations['k']",
            )
    elif kind == "resourceFieldRef":
        resource = str(body.get("resource") or "")
        if resource not in _ENV_RESOURCES and not resource.startswith(_ENV_RESOURCE_PREFIXES):
            yield FieldError(
                f"{path}.resource",
                f'"{resource}" is not a container resource',
                "use one of " + ", ".join(sorted(_ENV_RESOURCES)),
            )


def _toleration_errors(path: str, tolerations: Sequence[Toleration]) -> Iterator[FieldError]:
    for i, t in enumerate(tolerations):
        here = f"{path}[{i}]"
        if t.key:
            problem = qualified_name_problem(t.key)
            if problem:
                yield FieldError(f"{here}.key", problem, "use the taint's key")
        elif t.operator != "Exists":
            yield FieldError(
                f"{here}.operator",
                "an empty key matches every taint only with operator Exists",
                "set key, or use operator: Exists",
            )
        if t.operator == "Exists" and t.value:
            yield FieldError(  # at operator, where the API server reports it
                f"{here}.operator",
                f'operator Exists with value "{t.value}"',
                "remove value (Exists matches any value)",
            )
        elif t.value:
            problem = label_value_problem(t.value)
            if problem:
                yield FieldError(f"{here}.value", problem, "use the taint's value")
        if t.toleration_seconds is not None and t.effect != "NoExecute":
            yield FieldError(  # at effect, where the API server reports it
                f"{here}.effect",
                f"effect {t.effect or '(any)'} with tolerationSeconds set",
                "tolerationSeconds applies only to effect NoExecute: set that effect or remove tolerationSeconds",
            )


def _node_selector_errors(path: str, selector: Mapping[str, str]) -> Iterator[FieldError]:
    for key, value in selector.items():
        problem = qualified_name_problem(key)
        if problem:
            yield FieldError(f"{path}[{key}]", problem, "use a node label key")
        problem = label_value_problem(value)
        if problem:
            yield FieldError(f"{path}[{key}]", problem, "use a node label value")


def pod_field_errors(
    spec: JobSpec, runtime: RuntimeSpec, builtin_mount_paths: Sequence[str]
) -> list[FieldError]:
    """Every pod-validation problem of the fields this job passes through, job paths first."""
    ov = spec.runtime_overrides
    rt = f"{RUNTIME_KIND}.spec.pod"
    errors = [
        *_volume_errors(spec.volumes),
        *_mount_errors(spec.volume_mounts, builtin_mount_paths),
        *_env_errors("spec.env", spec.env),
        *_env_errors("spec.runtimeOverrides.env", ov.env or ()),
        *_env_errors(f"{rt}.env", runtime.pod.env),
    ]
    if ov.tolerations is not None:
        errors.extend(_toleration_errors("spec.runtimeOverrides.tolerations", ov.tolerations))
    else:
        errors.extend(_toleration_errors(f"{rt}.tolerations", runtime.pod.tolerations))
    if ov.node_selector is not None:
        errors.extend(_node_selector_errors("spec.runtimeOverrides.nodeSelector", ov.node_selector))
    else:
        errors.extend(_node_selector_errors(f"{rt}.nodeSelector", runtime.pod.node_selector))
    if spec.queue_name and label_value_problem(spec.queue_name):
        errors.append(
            FieldError(
                "spec.queueName",
                f"{len(spec.queue_name)} characters; it becomes the pods' kueue.x-k8s.io/queue-name label",
                "use a LocalQueue name of at most 63 characters",
            )
        )
    return errors
