"""Typed subsets of core Kubernetes types used inside HyperFrame specs (env, tolerations, mounts).

They are typed (not pass-through) so that mistakes are caught by the API server with a field
path; only ``env[].valueFrom`` and ``volumes[]`` pass through unchanged, because their many
variants are already validated by the API server when the pod is created.
"""

# spec_field() returns dataclasses.field(...) with metadata; ruff cannot see that.

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from hyperframe.api.fields import Rule, spec_field
from hyperframe.constants import RESERVED_ENV

__all__ = ["EnvVar", "Toleration", "VolumeMount"]

_RESERVED_CEL = "[" + ", ".join(f"'{n}'" for n in sorted(RESERVED_ENV)) + "]"


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvVar:
    """One environment variable for the training containers."""

    __rules__: ClassVar[tuple[Rule, ...]] = (
        Rule(
            cel=f"!(self.name in {_RESERVED_CEL})",
            message="this name is reserved: HyperFrame sets it in every pod",
            message_format="%s is reserved: HyperFrame sets it in every pod",
            message_args=("self.name",),
            fix="remove it; HyperFrame sets the rendezvous variables (MASTER_ADDR, WORLD_SIZE, PET_*) itself",
            field_path=".name",
            reason="FieldValueForbidden",
        ),
        Rule(
            cel="!(has(self.value) && has(self.valueFrom))",
            message="value and valueFrom are both set",
            fix="set only one of them",
        ),
    )

    name: str = spec_field("Variable name.", fmt="env-name", max_length=128)
    value: str | None = spec_field("Literal value.", default=None, max_length=32768)
    value_from: Mapping[str, Any] | None = spec_field(
        "A Kubernetes EnvVarSource (secretKeyRef, configMapKeyRef, fieldRef, resourceFieldRef), "
        "passed through to the pod unchanged.",
        default=None,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Toleration:
    """A pod toleration, as in core/v1."""

    key: str | None = spec_field(
        "Taint key; empty with operator Exists matches every taint.", default=None, max_length=317
    )
    operator: Literal["Exists", "Equal"] = spec_field("How key and value are compared.", default="Equal")
    value: str | None = spec_field("Taint value for operator Equal.", default=None, max_length=63)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = spec_field(
        "Taint effect to match; empty matches all effects.", default=None
    )
    toleration_seconds: int | None = spec_field(
        "For NoExecute: how long the pod stays bound after the taint appears.", default=None, minimum=0
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeMount:
    """Where a volume from ``spec.volumes`` is mounted in the trainer and smoke-gate containers."""

    name: str = spec_field("Name of a volume in spec.volumes.", fmt="dns-label", max_length=63)
    mount_path: str = spec_field("Absolute path in the container.", fmt="absolute-path", max_length=4096)
    read_only: bool = spec_field("Mount read-only.", default=False)
    sub_path: str | None = spec_field("Sub-path inside the volume.", default=None, max_length=4096)
