"""Turn the operator's RBAC needs (``hyperframe.controller.rbac``) into the chart's rule data.

The operator owns *which* verbs it uses. The chart owns *where* they are granted: a rule on a
cluster-scoped resource always goes into the ClusterRole; a namespaced rule goes into the
ClusterRole when the operator watches every namespace, or into one Role per watched namespace;
the leader-election Lease lives in the release's own namespace and is granted only there.
Some rules are only needed in one configuration (the ``when`` tag), so a default install grants
nothing it does not use:

* ``podGroups``          gang-scheduler PodGroups, only with ``rbac.podGroups.enabled``;
* ``leaderElection``     the Lease and the leader label on the operator's own pod, only with
  ``operator.leaderElection.enabled``, granted in the release's namespace only;
* ``always``             everything else.

A resource whose scope this module does not know stops the generator: granting it is a decision.
"""

from __future__ import annotations

from typing import Final

from hyperframe.controller.rbac import OPERATOR_RULES

SOURCE: Final = "operator/src/hyperframe/controller/rbac.py (OPERATOR_RULES)"

CLUSTER_SCOPED: Final = frozenset(
    {
        "nodes",
        "hyperframeruntimes",
        "customresourcedefinitions",
        "tokenreviews",
    }
)
NAMESPACED: Final = frozenset(
    {
        "hyperframejobs",
        "pods",
        "services",
        "configmaps",
        "events",
        "podgroups",
    }
)
# Granted by a Role in the release's namespace, whatever namespaces are watched.
OPERATOR_NAMESPACE: Final = frozenset({"leases"})
POD_GROUP_API_GROUPS: Final = frozenset({"scheduling.volcano.sh", "scheduling.x-k8s.io"})


def scope_of(resource: str) -> str:
    base = resource.split("/", 1)[0]
    if base in CLUSTER_SCOPED:
        return "Cluster"
    if base in NAMESPACED:
        return "Namespaced"
    if base in OPERATOR_NAMESPACE:
        return "OperatorNamespace"
    raise SystemExit(
        f"{SOURCE}: resource {resource!r} has no known scope; add it to CLUSTER_SCOPED, NAMESPACED or OPERATOR_NAMESPACE "
        f"in {__file__} so the chart knows whether to grant it cluster-wide or per namespace"
    )


def when_of(api_group: str, resource: str) -> str:
    if api_group in POD_GROUP_API_GROUPS:
        return "podGroups"
    if resource == "leases":
        return "leaderElection"
    return "always"


def tagged_rules() -> list[dict[str, object]]:
    """One chart rule per (rule, scope, condition): rules are split where rbac.py mixes them."""
    out: list[dict[str, object]] = []
    for rule in OPERATOR_RULES:
        groups: dict[tuple[str, str], list[str]] = {}
        for resource in rule.resources:
            key = (
                ("OperatorNamespace", "leaderElection")
                if rule.leader_election
                else (scope_of(resource), when_of(rule.api_group, resource))
            )
            groups.setdefault(key, []).append(resource)
        for (scope, when), resources in groups.items():
            out.append(
                {
                    "apiGroups": [rule.api_group],
                    "resources": resources,
                    "verbs": list(rule.verbs),
                    "scope": scope,
                    "when": when,
                    "why": rule.why,
                }
            )
    return out
