"""The chart's HA rendering: a rolling update of 1 or 2 replicas can complete, and progress posts
reach the leader.

Readiness is health (GET /healthz), not leadership, so a standby is Ready and a new pod is Ready
before an old one goes (maxSurge 1, maxUnavailable 0). The Service selects the label the leader
sets on its own pod; the leader-election Role lets the operator set it on pods of its own
namespace only. Two replicas get a PodDisruptionBudget of one; one replica gets none.
"""

from __future__ import annotations

from typing import Any

from chart_helpers import Render, by_kind, one
from hyperframe.constants import LABEL_OPERATOR_LEADER

HA = {"replicaCount": 2}
NO_ELECTION = {"operator": {"leaderElection": {"enabled": False}}}


def _pod_template(objects: list[dict[str, Any]]) -> dict[str, Any]:
    template = one(objects, "Deployment")["spec"]["template"]
    assert isinstance(template, dict)
    return template


def _env_from(objects: list[dict[str, Any]]) -> dict[str, str]:
    [container] = _pod_template(objects)["spec"]["containers"]
    return {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"] if "valueFrom" in e}


def test_rollouts_of_one_and_two_replicas_keep_a_ready_replica_and_need_no_leader_to_be_ready(
    render: Render,
) -> None:
    for values in ({}, HA):
        objects = render(values)
        deployment = one(objects, "Deployment")
        assert deployment["spec"]["strategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
        }, values
        [container] = _pod_template(objects)["spec"]["containers"]
        probe = container["readinessProbe"]
        assert probe["httpGet"] == {"path": "/healthz", "port": "health"}, "readiness must not mean leading"
        assert "tcpSocket" not in probe


def test_the_service_routes_to_the_pod_the_leader_labels(render: Render) -> None:
    objects = render(namespace="hf-ns")
    selector = one(objects, "Service")["spec"]["selector"]
    pod_labels = _pod_template(objects)["metadata"]["labels"]
    assert selector.pop(LABEL_OPERATOR_LEADER) == "true"
    assert LABEL_OPERATOR_LEADER not in pod_labels, "the label is the leader's to set, not the template's"
    assert selector.items() <= pod_labels.items()
    assert _env_from(objects) == {
        "HYPERFRAME_POD_NAME": "metadata.name",
        "HYPERFRAME_POD_NAMESPACE": "metadata.namespace",
    }
    # The right to label is the leader-election Role's, in the release's namespace only.
    role = next(r for r in by_kind(objects, "Role") if r["metadata"]["namespace"] == "hf-ns")
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]} in role["rules"]
    cluster_rules = [r for c in by_kind(objects, "ClusterRole") for r in c["rules"]]
    assert not any("patch" in r["verbs"] for r in cluster_rules if "pods" in r["resources"])


def test_without_election_one_replica_is_recreated_and_the_service_selects_it_as_is(render: Render) -> None:
    objects = render(NO_ELECTION)
    assert one(objects, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    assert LABEL_OPERATOR_LEADER not in one(objects, "Service")["spec"]["selector"]
    assert _env_from(objects) == {}
    assert by_kind(objects, "PodDisruptionBudget") == []


def test_two_replicas_get_a_budget_of_one_and_one_replica_none(render: Render) -> None:
    assert by_kind(render(), "PodDisruptionBudget") == []
    objects = render(HA)
    budget = one(objects, "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 1 and "minAvailable" not in budget["spec"]
    assert (
        budget["spec"]["selector"]["matchLabels"].items()
        <= _pod_template(objects)["metadata"]["labels"].items()
    )
    assert by_kind(render({**HA, "podDisruptionBudget": {"enabled": False}}), "PodDisruptionBudget") == []
