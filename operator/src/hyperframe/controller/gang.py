"""Carrying out the creation of a gang: the dry run of its PodGroup and pods, then the creates.

The decisions (what a refusal means, what to roll back, when to try again) are the state
machine's (:func:`~hyperframe.controller.state_machine.refused`, :mod:`.policy_gang`); this module
only talks to the API server and reports what it answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperframe.constants import LABEL_ROLE

from .kube import ApiError, KubeApi
from .policy_gang import REFUSED_STATUS_CODES, Refusal

__all__ = ["Describe", "GangOutcome", "create_gang", "dry_run_gang", "dry_run_objects"]

Describe = Callable[[ApiError, str], str]
"""The job-level message for a refused object: (error, kind) -> message."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GangOutcome:
    refusal: Refusal | None = None
    """The first refused object, if any."""
    created: Mapping[str, str] = field(default_factory=dict)
    """Pods this call created: name -> uid (pods that already existed are not in it)."""
    stored: tuple[Mapping[str, Any], ...] = ()
    """The API server's answers for the pods this call created, for the pod cache: the watch may
    report them later than the next reconcile runs."""


def _first_refusal(
    objects: Sequence[Mapping[str, Any]], results: Sequence[object], describe: Describe, *, dry_run: bool
) -> Refusal | None:
    for obj, result in zip(objects, results, strict=True):
        if isinstance(result, ApiError) and result.status in REFUSED_STATUS_CODES:
            kind = str(obj.get("kind"))
            return Refusal(
                status_code=result.status,
                kind=kind,
                name=str((obj.get("metadata") or {}).get("name", "")),
                message=describe(result, kind),
                dry_run=dry_run,
            )
    return None


def _raise_first_error(results: Sequence[object]) -> None:
    for result in results:
        if isinstance(result, BaseException):
            raise result


_NOT_DRY_RUN = frozenset({"Service", "ConfigMap"})
"""Kinds the operator renders whole and that hold no resources: a refusal of one on creation comes
before any pod is created (:func:`create_gang` creates them first), so their dry run would only
cost two requests per gang."""


def dry_run_objects(objects: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """What :func:`dry_run_gang` sends: the PodGroup and the first pod of each role.

    The pods of a gang differ only in their names, hostnames, rank (labels and environment) and
    role label (``master`` for rank 0, ``worker`` otherwise). A quota, LimitRange, PodSecurity,
    RBAC and the API server's validation therefore answer the dry run of one pod as they would
    answer each of them: a dry run is admitted against what is stored, never against the gang's
    other dry runs. A policy that tells ranks apart by more than the role is met on creation,
    which rolls the gang back.
    """
    roles: set[str] = set()
    checked: list[Mapping[str, Any]] = []
    for obj in objects:
        kind = obj.get("kind")
        if kind in _NOT_DRY_RUN:
            continue
        if kind == "Pod":
            role = str(((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_ROLE, ""))
            if role in roles:
                continue
            roles.add(role)
        checked.append(obj)
    return checked


async def dry_run_gang(
    kube: KubeApi, namespace: str, objects: Sequence[Mapping[str, Any]], describe: Describe
) -> Refusal | None:
    """A server-side dry run (``dryRun=All``) of the PodGroup and one pod of each role: the first
    refusal (see :func:`dry_run_objects`).

    Each object is admitted on its own against what the cluster holds now, so a quota with room
    for one pod but not for the whole gang passes here and refuses a real create later.
    """
    checked = dry_run_objects(objects)
    results = await asyncio.gather(
        *(kube.create(namespace, o, dry_run=True) for o in checked), return_exceptions=True
    )
    refusal = _first_refusal(checked, results, describe, dry_run=True)
    if refusal is None:
        _raise_first_error(results)
    return refusal


async def create_gang(
    kube: KubeApi, namespace: str, objects: Sequence[Mapping[str, Any]], describe: Describe
) -> GangOutcome:
    """Create the Service, ConfigMap and PodGroup, then the pods in parallel (create-if-absent).

    A refusal is returned with the pods created so far, for the caller to roll back. Any other
    error is raised once every create has answered; the pods created by then stay, and the next
    reconcile completes the gang.
    """
    support = [o for o in objects if o.get("kind") != "Pod"]
    pods = [o for o in objects if o.get("kind") == "Pod"]
    # The Service, ConfigMap and PodGroup exist before any pod that needs them.
    results = await asyncio.gather(*(kube.create(namespace, o) for o in support), return_exceptions=True)
    refusal = _first_refusal(support, results, describe, dry_run=False)
    if refusal is not None:
        return GangOutcome(refusal=refusal)
    _raise_first_error(results)
    results = await asyncio.gather(*(kube.create(namespace, o) for o in pods), return_exceptions=True)
    created = {
        str(pod["metadata"]["name"]): str((result.get("metadata") or {}).get("uid", ""))
        for pod, result in zip(pods, results, strict=True)
        if isinstance(result, dict)
    }
    stored = tuple(r for r in results if isinstance(r, dict))
    refusal = _first_refusal(pods, results, describe, dry_run=False)
    if refusal is None:
        _raise_first_error(results)
    return GangOutcome(refusal=refusal, created=created, stored=stored)
