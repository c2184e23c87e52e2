"""Operator config from HYPERFRAME_* variables, RBAC data, pod/node observation, and drift with the API."""

from __future__ import annotations

import re

import pytest
from hyperframe.api.status import CONDITION_TYPES, PHASES
from hyperframe.constants import (
    INIT_CONTAINER_NAME,
    LABEL_GENERATION,
    LABEL_JOB,
    LABEL_RANK,
    MAIN_CONTAINER_NAME,
)
from hyperframe.controller.__main__ import main as operator_main
from hyperframe.controller.config import ConfigError, OperatorConfig
from hyperframe.controller.observed import KUEUE_ADMISSION_GATE, observe_node, observe_pod
from hyperframe.controller.rbac import OPERATOR_RULES, as_cluster_role_rules
from hyperframe.controller.status import ConditionType, JobStatus, Phase


def test_config_reads_prefixed_variables_and_converts_types() -> None:
    cfg = OperatorConfig.from_env(
        {
            "HYPERFRAME_NAMESPACES": "a, b,",
            "HYPERFRAME_API_QPS": "20",
            "HYPERFRAME_API_BURST": "40",
            "HYPERFRAME_RESTART_BACKOFF_SECONDS": "0.5",
            "HYPERFRAME_STATUS_ENDPOINT_URL": "http://op.ns.svc:8081",
            "HYPERFRAME_STATUS_URL": "pod variable, ignored",
            "PATH": "/bin",
        }
    )
    assert cfg.namespaces == ("a", "b")
    assert cfg.api_qps == 20.0 and cfg.api_burst == 40
    assert cfg.restart_backoff_seconds == 0.5
    assert cfg.status_endpoint_url == "http://op.ns.svc:8081"


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        (
            {"HYPERFRAME_API_QPS": "fast"},
            'HYPERFRAME_API_QPS: expected a number, got string "fast": use a number > 0',
        ),
        ({"HYPERFRAME_API_QPS": "0"}, "HYPERFRAME_API_QPS: 0 is not above the minimum 0: use a value > 0"),
        (
            {"HYPERFRAME_METRICS_PORT": "70000"},
            "HYPERFRAME_METRICS_PORT: 70000 is above the maximum 65535: use a value <= 65535",
        ),
        (
            {"HYPERFRAME_PROGRESS_FLUSH_SECONDS": "60"},
            "HYPERFRAME_PROGRESS_FLUSH_SECONDS: 60 is above the maximum 30: use a value <= 30",
        ),
        (
            {"HYPERFRAME_APIQPS": "5"},
            "HYPERFRAME_APIQPS: not an operator setting: remove it or fix the spelling (did you mean HYPERFRAME_API_QPS?)",
        ),
        (
            {"HYPERFRAME_STATUS_ENDPOINT_URL": "op:8081"},
            'HYPERFRAME_STATUS_ENDPOINT_URL: "op:8081" is not an http:// or https:// URL: use an http',
        ),
        (
            {"HYPERFRAME_STATUS_TLS_CERT_FILE": "/tls/crt"},
            "HYPERFRAME_STATUS_TLS_KEY_FILE: required with HYPERFRAME_STATUS_TLS_CERT_FILE: set both (HTTPS) or neither",
        ),
        (
            {"HYPERFRAME_STATUS_TLS_CERT_FILE": "/c", "HYPERFRAME_STATUS_TLS_KEY_FILE": "/k"},
            "HYPERFRAME_STATUS_TLS_CA_FILE: required with a serving certificate: set it to the PEM CA",
        ),
        (
            {
                "HYPERFRAME_STATUS_TLS_CERT_FILE": "/c",
                "HYPERFRAME_STATUS_TLS_KEY_FILE": "/k",
                "HYPERFRAME_STATUS_TLS_CA_FILE": "/ca",
                "HYPERFRAME_STATUS_ENDPOINT_URL": "http://op.ns.svc:8081",
            },
            'HYPERFRAME_STATUS_ENDPOINT_URL: "http://op.ns.svc:8081" is plain HTTP but the endpoint serves HTTPS: use https://',
        ),
        (
            {"HYPERFRAME_LEASE_DURATION_SECONDS": "5"},
            "HYPERFRAME_LEASE_RETRY_SECONDS: 2.0 s, a renew deadline of 10.0 s and a lease of 5.0 s are not in "
            "increasing order",
        ),
        (
            {"HYPERFRAME_UNSCHEDULABLE_ACTION": "fail"},
            'HYPERFRAME_UNSCHEDULABLE_ACTION: unknown value string "fail": use one of Fail, Wait',
        ),
        (
            {"HYPERFRAME_UNSCHEDULABLE_TIMEOUT_SECONDS": "0"},
            "HYPERFRAME_UNSCHEDULABLE_TIMEOUT_SECONDS: 0 is not above the minimum 0: use a value > 0",
        ),
    ],
)
def test_config_errors_name_the_variable_and_the_fix(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(needle)):
        OperatorConfig.from_env(env)


def test_every_bad_variable_is_named_at_once_as_var_problem_fix() -> None:
    env = {"HYPERFRAME_API_QPS": "nan", "HYPERFRAME_WORKERS": "many", "HYPERFRAME_LOG_LEVEL": "loud"}
    with pytest.raises(ConfigError) as refused:
        OperatorConfig.from_env({**env, "HYPERFRAME_METRIC_PORT": "9090"})
    assert str(refused.value).splitlines() == [
        "HYPERFRAME_METRIC_PORT: not an operator setting: remove it or fix the spelling "
        "(did you mean HYPERFRAME_METRICS_PORT?)",
        "HYPERFRAME_API_QPS: nan is not a finite number: use a finite number",  # was accepted before
        'HYPERFRAME_WORKERS: expected an integer, got string "many": use an integer >= 1',
        'HYPERFRAME_LOG_LEVEL: unknown level "loud": use DEBUG, INFO, WARNING, ERROR',
    ]


def test_the_operator_refuses_to_start_and_prints_each_bad_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("faulthandler.register", lambda *_a, **_k: None)  # needs a real stderr
    monkeypatch.setenv("HYPERFRAME_API_QPS", "fast")
    monkeypatch.setenv("HYPERFRAME_PROGRESS_FLUSH_SECONDS", "60")
    assert operator_main() == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("hyperframe operator: bad configuration")
    assert '  HYPERFRAME_API_QPS: expected a number, got string "fast": use a number > 0' in lines
    assert "  HYPERFRAME_PROGRESS_FLUSH_SECONDS: 60 is above the maximum 30: use a value <= 30" in lines


def test_rbac_rules_are_least_privilege_data() -> None:
    rules = as_cluster_role_rules()
    assert len(rules) == len(OPERATOR_RULES)
    verbs = {
        (r["apiGroups"][0], res): set(r["verbs"])
        for r, rule in zip(rules, OPERATOR_RULES, strict=True)
        for res in r["resources"]
        if not rule.leader_election
    }
    assert verbs[("", "pods")] == {"get", "list", "watch", "create", "delete"}
    own = [r for r in OPERATOR_RULES if r.leader_election and "pods" in r.resources]
    assert [set(r.verbs) for r in own] == [{"get", "patch"}], "on its own pod: read and label, nothing else"
    assert "update" not in verbs[("hyperframe.dev", "hyperframejobs")]
    assert all("*" not in v for v in verbs.values())


def test_phases_and_condition_types_match_the_api() -> None:
    assert {p.value for p in Phase} <= set(PHASES)
    assert {c.value for c in ConditionType} == set(CONDITION_TYPES)


def _pod(**status: object) -> dict[str, object]:
    return {
        "metadata": {"name": "p", "labels": {LABEL_JOB: "j", LABEL_RANK: "1", LABEL_GENERATION: "2"}},
        "spec": {"nodeName": "n1"},
        "status": status,
    }


def test_observe_pod_reads_gate_and_main_container_states() -> None:
    pod = observe_pod(
        _pod(
            phase="Failed",
            initContainerStatuses=[
                {"name": INIT_CONTAINER_NAME, "state": {"terminated": {"exitCode": 1, "message": "{}"}}}
            ],
            containerStatuses=[
                {"name": MAIN_CONTAINER_NAME, "state": {"waiting": {"reason": "PodInitializing"}}}
            ],
        )
    )
    assert pod is not None
    assert (pod.rank, pod.generation, pod.node, pod.phase) == (1, 2, "n1", "Failed")
    assert pod.gate_end is not None and pod.gate_end.exit_code == 1 and not pod.gate_passed
    assert not pod.main_started and pod.main_end is None


def test_observe_pod_reads_kueues_admission_gate_and_queue() -> None:
    labels = {LABEL_JOB: "j", LABEL_RANK: "1", LABEL_GENERATION: "2", "kueue.x-k8s.io/queue-name": "gpus"}
    released = observe_pod({"metadata": {"name": "p", "labels": labels}, "spec": {}})
    gated = observe_pod(
        {
            "metadata": {"name": "p", "labels": labels},
            "spec": {"schedulingGates": [{"name": KUEUE_ADMISSION_GATE}]},
        }
    )
    assert released is not None and released.queue_gated is None
    assert gated is not None and gated.queue_gated == "gpus"


def test_observe_pod_reads_the_schedulers_unschedulable_verdict_but_not_kueues_gate() -> None:
    said = "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."

    def scheduled(reason: str) -> dict[str, object]:
        cond = {"type": "PodScheduled", "status": "False", "reason": reason, "message": said}
        body = _pod(phase="Pending", conditions=[{**cond, "lastTransitionTime": "2026-01-01T00:00:00Z"}])
        return {**body, "spec": {}}

    stuck = observe_pod(scheduled("Unschedulable"))
    assert stuck is not None and stuck.unschedulable is not None
    assert stuck.unschedulable.message == said and stuck.unschedulable.since is not None
    gated = observe_pod(scheduled("SchedulingGated"))  # Kueue's admission gate: queued, not stuck
    assert gated is not None and gated.unschedulable is None


def test_observe_pod_reads_the_disruption_target_condition_only_while_true() -> None:
    def disrupted(status: str) -> dict[str, object]:
        cond = {
            "type": "DisruptionTarget",
            "status": status,
            "reason": "EvictionByEvictionAPI",
            "message": "m",
        }
        return _pod(phase="Running", conditions=[cond])

    evicted = observe_pod(disrupted("True"))
    assert evicted is not None and evicted.disruption is not None
    assert (evicted.disruption.reason, evicted.disruption.message) == ("EvictionByEvictionAPI", "m")
    cleared = observe_pod(disrupted("False"))
    assert cleared is not None and cleared.disruption is None


def test_observe_pod_ignores_pods_without_valid_labels() -> None:
    assert observe_pod({"metadata": {"name": "x", "labels": {LABEL_JOB: "j", LABEL_RANK: "one"}}}) is None


def test_observe_node_readiness() -> None:
    node = observe_node(
        {
            "metadata": {"name": "n1"},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ]
            },
        }
    )
    assert node.name == "n1" and not node.ready and node.since is not None and not node.cordoned
    assert observe_node({"metadata": {"name": "n2"}, "spec": {"unschedulable": True}}).cordoned


def test_status_round_trips_and_patches_only_changes() -> None:
    raw = {"phase": "Running", "restarts": 1, "gangGeneration": 1, "excludedNodes": ["n1"], "message": "m"}
    status = JobStatus.from_dict(raw)
    assert status.phase == Phase.RUNNING
    patch = status.replace(restarts=2).to_patch(status.to_dict())
    assert patch == {"restarts": 2}


def test_service_link_variables_of_the_operators_own_service_are_not_settings() -> None:
    # What the kubelet injects into a pod of a namespace holding Service `hyperframe-operator`.
    env = {
        "HYPERFRAME_OPERATOR_SERVICE_HOST": "10.96.0.12",
        "HYPERFRAME_OPERATOR_SERVICE_PORT": "8080",
        "HYPERFRAME_OPERATOR_SERVICE_PORT_STATUS": "8081",
        "HYPERFRAME_OPERATOR_PORT": "tcp://10.96.0.12:8080",
        "HYPERFRAME_OPERATOR_PORT_8080_TCP": "tcp://10.96.0.12:8080",
        "HYPERFRAME_OPERATOR_PORT_8080_TCP_PROTO": "tcp",
        "HYPERFRAME_OPERATOR_PORT_8080_TCP_PORT": "8080",
        "HYPERFRAME_OPERATOR_PORT_8080_TCP_ADDR": "10.96.0.12",
        "HYPERFRAME_WORKERS": "3",
    }
    assert OperatorConfig.from_env(env).workers == 3


def test_a_misspelt_port_setting_is_still_an_error() -> None:
    with pytest.raises(ConfigError, match="HYPERFRAME_METRIC_PORT: not an operator setting"):
        OperatorConfig.from_env({"HYPERFRAME_METRIC_PORT": "9090"})
