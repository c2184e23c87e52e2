"""Every Kubernetes API verb the operator uses, as data: the single source for least-privilege RBAC.

The Helm chart's ClusterRole is generated from (or checked against) :data:`OPERATOR_RULES`; a unit
test scans the operator's API calls so that a new call without a rule here fails CI.
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperframe.constants import GROUP, JOB_PLURAL, RUNTIME_PLURAL
from hyperframe.render.objects import PODGROUP_API

__all__ = ["OPERATOR_RULES", "PolicyRule", "as_cluster_role_rules"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyRule:
    """One RBAC rule: API group, resources, verbs, and why the operator needs them."""

    api_group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str
    leader_election: bool = False
    """Needed only with leader election, and only in the operator's own namespace."""


OPERATOR_RULES: tuple[PolicyRule, ...] = (
    PolicyRule(
        api_group=GROUP,
        resources=(JOB_PLURAL,),
        verbs=("get", "list", "watch", "delete"),
        why="watch jobs (kopf), re-read before a status write, delete on ttlSecondsAfterFinished",
    ),
    PolicyRule(
        api_group=GROUP,
        resources=(f"{JOB_PLURAL}/status",),
        verbs=("get", "patch"),
        why="write status once per reconcile (merge patch with resourceVersion) and progress",
    ),
    PolicyRule(
        api_group=GROUP,
        resources=(RUNTIME_PLURAL,),
        verbs=("get", "list", "watch"),
        why="read the HyperFrameRuntime a job refers to",
    ),
    PolicyRule(
        api_group="",
        resources=("pods",),
        verbs=("get", "list", "watch", "create", "delete"),
        why="gang pods: create per generation, delete on restart/suspend/cleanup, get for progress auth",
    ),
    PolicyRule(
        api_group="",
        resources=("services", "configmaps"),
        verbs=("create",),
        why="headless Service and job ConfigMap (create-if-absent; GC deletes them via ownerReferences)",
    ),
    PolicyRule(
        api_group="",
        resources=("nodes",),
        verbs=("get", "list", "watch"),
        why="notice NotReady nodes under running gangs",
    ),
    PolicyRule(
        api_group="",
        resources=("events",),
        verbs=("create",),
        why="record transitions and failures on the HyperFrameJob",
    ),
    *(
        PolicyRule(
            api_group=api_version.rpartition("/")[0],
            resources=("podgroups",),
            verbs=("create",),
            why=f"gang PodGroup when the runtime asks for {flavour}",
        )
        for flavour, api_version in sorted(PODGROUP_API.items())
    ),
    PolicyRule(
        api_group="authentication.k8s.io",
        resources=("tokenreviews",),
        verbs=("create",),
        why="authenticate progress reports (pod-bound service-account tokens)",
    ),
    PolicyRule(
        api_group="coordination.k8s.io",
        resources=("leases",),
        verbs=("get", "create", "update"),
        why="leader election between operator replicas (one Lease in the operator's namespace)",
        leader_election=True,
    ),
    PolicyRule(
        api_group="",
        resources=("pods",),
        verbs=("get", "patch"),
        why="the leader label on the operator's own pod (the Service routes progress posts by it)",
        leader_election=True,
    ),
    PolicyRule(
        api_group="apiextensions.k8s.io",
        resources=("customresourcedefinitions",),
        verbs=("get", "list", "watch"),
        why="kopf resource discovery",
    ),
)


def as_cluster_role_rules() -> list[dict[str, list[str]]]:
    """The rules in the shape of a ClusterRole's ``rules`` list."""
    return [
        {"apiGroups": [rule.api_group], "resources": list(rule.resources), "verbs": list(rule.verbs)}
        for rule in OPERATOR_RULES
    ]
