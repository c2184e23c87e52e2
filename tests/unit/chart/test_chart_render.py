"""What `helm template` renders for given values: CRDs, RBAC, the Deployment, runtimes, naming."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from chart_helpers import CHART, Render, by_kind, load_generator, one
from hyperframe.controller.config import OperatorConfig
from hyperframe.controller.rbac import OPERATOR_RULES
from hyperframe.images.repo import RUNTIMES_FILE, load_matrix
from hyperframe_devcluster import paths

KEEP = "helm.sh/resource-policy"
POD_GROUP_API_GROUPS: set[str] = set(load_generator().rbac_source.POD_GROUP_API_GROUPS)


def crds_of(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {crd["metadata"]["name"]: crd for crd in by_kind(objects, "CustomResourceDefinition")}


# --- CRDs -------------------------------------------------------------------------------------


def test_chart_crds_are_the_project_crds(render: Render) -> None:
    rendered = crds_of(render())
    project = {crd["metadata"]["name"]: crd for crd, _ in load_generator().project_crds()}
    assert project, "crds/ is empty"
    for name, crd in project.items():
        assert rendered[name]["spec"] == crd["spec"], f"{name}: chart CRD differs from crds/"
    assert set(rendered) == set(project)


def test_crds_are_kept_on_uninstall_by_default_and_not_when_keep_is_false(render: Render) -> None:
    for crd in crds_of(render()).values():
        assert crd["metadata"]["annotations"][KEEP] == "keep"
    for crd in crds_of(render({"crds": {"keep": False}})).values():
        assert KEEP not in (crd["metadata"].get("annotations") or {})


def test_crds_enabled_false_renders_no_crd(render: Render) -> None:
    assert crds_of(render({"crds": {"enabled": False}})) == {}


def test_keep_warning_is_in_values_yaml() -> None:
    text = (CHART / "values.yaml").read_text()
    assert "deleting a CustomResourceDefinition deletes every object of that kind" in text


# --- RBAC -------------------------------------------------------------------------------------


def operator_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Everything but the `helm test` hook's own objects."""
    return [o for o in objects if o["metadata"].get("annotations", {}).get("helm.sh/hook") != "test"]


def granted(roles: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for role in roles
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def needed(*, exclude: set[str], leader_election: bool = True) -> set[tuple[str, str, str]]:
    return {
        (rule.api_group, resource, verb)
        for rule in OPERATOR_RULES
        for resource in rule.resources
        for verb in rule.verbs
        if resource not in exclude
        and rule.api_group not in exclude
        and (leader_election or not rule.leader_election)
    }


def leader_election_role(objects: list[dict[str, Any]]) -> dict[str, Any]:
    [role] = [r for r in by_kind(objects, "Role") if r["metadata"]["name"].endswith("-leader-election")]
    return role


def test_cluster_wide_rbac_is_exactly_the_operator_rules(render: Render) -> None:
    objects = operator_objects(render(namespace="hf-ns"))
    role = one(objects, "ClusterRole")
    # Default: no PodGroups; the Lease and the leader label only in the release's namespace,
    # never cluster-wide.
    assert granted([role]) == needed(exclude={*POD_GROUP_API_GROUPS}, leader_election=False)
    lease_role = leader_election_role(objects)
    assert lease_role["metadata"]["namespace"] == "hf-ns"
    assert granted([lease_role]) == {
        *(("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")),
        ("", "pods", "get"),
        ("", "pods", "patch"),
    }
    [binding] = by_kind(objects, "RoleBinding")
    assert binding["metadata"]["namespace"] == "hf-ns"
    assert binding["roleRef"]["name"] == lease_role["metadata"]["name"]


def test_pod_groups_and_leader_election_switch_their_rules(render: Render) -> None:
    def operator_rules(values: dict[str, Any]) -> set[tuple[str, str, str]]:
        objects = render(values)
        return granted([o for o in operator_objects(objects) if o["kind"] in ("ClusterRole", "Role")])

    with_pod_groups = operator_rules({"rbac": {"podGroups": {"enabled": True}}})
    assert {(group, "podgroups", "create") for group in POD_GROUP_API_GROUPS} <= with_pod_groups
    no_election = operator_rules({"operator": {"leaderElection": {"enabled": False}}})
    assert not {r for r in no_election if r[1] == "leases" or (r[1], r[2]) == ("pods", "patch")}


def test_watched_namespaces_get_roles_and_the_cluster_role_keeps_only_cluster_rights(render: Render) -> None:
    objects = render({"watchNamespaces": ["team-a", "team-b"]})
    cluster_role = one(operator_objects(objects), "ClusterRole")
    assert {r[1] for r in granted([cluster_role])} == {
        "hyperframeruntimes",
        "nodes",
        "customresourcedefinitions",
        "tokenreviews",
    }
    roles = by_kind(operator_objects(objects), "Role")
    lease_role = leader_election_role(operator_objects(objects))
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["hyperframe-system", "team-a", "team-b"]
    bindings = by_kind(operator_objects(objects), "RoleBinding")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["hyperframe-system", "team-a", "team-b"]
    assert granted([cluster_role, *roles]) == needed(exclude={*POD_GROUP_API_GROUPS})
    assert {r[1] for r in granted([lease_role])} == {"leases", "pods"}


def test_operator_is_bound_to_its_cluster_role(render: Render) -> None:
    objects = operator_objects(render(namespace="hf-ns"))
    binding = one(objects, "ClusterRoleBinding")
    role = one(objects, "ClusterRole")
    account = one(objects, "ServiceAccount")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "hf-ns"}
    ]


# --- Deployment -------------------------------------------------------------------------------


def operator_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert isinstance(container, dict)
    return container


def operator_env(objects: list[dict[str, Any]]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in operator_container(objects)["env"] if "value" in e}


def test_rendered_env_is_a_valid_operator_config(render: Render) -> None:
    config = OperatorConfig.from_env(operator_env(render(namespace="hf-ns")))
    assert config.namespaces == ()
    assert (config.lease_name, config.lease_namespace) == ("hf-hyperframe-operator", "hf-ns")
    assert config.status_endpoint_url == "https://hf-hyperframe-operator.hf-ns.svc:8081"
    tls_dir = "/etc/hyperframe-operator/status-tls"
    assert (config.status_tls_cert_file, config.status_tls_key_file, config.status_tls_ca_file) == (
        f"{tls_dir}/tls.crt",
        f"{tls_dir}/tls.key",
        f"{tls_dir}/ca.crt",
    )
    assert (config.liveness_port, config.metrics_port, config.status_port) == (8080, 9090, 8081)

    config = OperatorConfig.from_env(
        operator_env(
            render(
                {
                    "watchNamespaces": ["a", "b"],
                    "operator": {
                        "qps": 7,
                        "burst": 9,
                        "workers": 3,
                        "logLevel": "DEBUG",
                        "leaderElection": {"enabled": False},
                    },
                    "service": {"enabled": False},
                }
            )
        )
    )
    assert config.namespaces == ("a", "b")
    assert (config.api_qps, config.api_burst, config.workers, config.log_level) == (7.0, 9, 3, "DEBUG")
    assert config.lease_name == ""
    assert config.status_endpoint_url == ""


def test_progress_is_served_with_the_charts_certificate_or_a_given_secret(render: Render) -> None:
    objects = render(namespace="hf-ns")
    secret = one(objects, "Secret")
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "status-tls", "secret": {"secretName": secret["metadata"]["name"]}} in pod["volumes"]
    given = render({"statusTLS": {"existingSecret": "from-cert-manager"}})
    assert by_kind(given, "Secret") == []
    volumes = one(given, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "status-tls", "secret": {"secretName": "from-cert-manager"}} in volumes
    plain = render({"statusTLS": {"enabled": False}})
    assert by_kind(plain, "Secret") == []
    config = OperatorConfig.from_env(operator_env(plain))
    assert config.status_endpoint_url.startswith("http://") and not config.status_tls_cert_file


def test_operator_pod_is_locked_down(render: Render) -> None:
    objects = render()
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    container = operator_container(objects)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    # Ready means healthy, not leading (tests/unit/chart/test_chart_ha.py).
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "health": 8080,
        "metrics": 9090,
        "status": 8081,
    }
    assert container["command"] == ["python", "-m", "hyperframe.controller"]
    assert "limits" in container["resources"] and "requests" in container["resources"]


def test_image_comes_from_the_pin_matrix(render: Render) -> None:
    matrix = load_matrix(paths.repo_root())
    assert operator_container(render())["image"] == matrix.operator_image()
    digest = "sha256:" + "a" * 64
    assert (
        operator_container(render({"image": {"digest": digest}}))["image"]
        == f"{matrix.operator_repository()}@{digest}"
    )
    assert (
        operator_container(render({"image": {"repository": "r.example/op", "tag": "t1"}}))["image"]
        == "r.example/op:t1"
    )
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == matrix.version


def test_more_replicas_without_leader_election_is_refused(
    render_error: Callable[[dict[str, Any]], str],
) -> None:
    message = render_error({"replicaCount": 2, "operator": {"leaderElection": {"enabled": False}}})
    assert "replicaCount: 2 replicas need operator.leaderElection.enabled: true" in message


def test_metrics_service_and_optional_service_monitor(
    render: Render, render_error: Callable[[dict[str, Any]], str]
) -> None:
    objects = render()
    service = one(objects, "Service")
    assert {p["name"] for p in service["spec"]["ports"]} == {"metrics", "health", "status"}
    assert by_kind(objects, "ServiceMonitor") == []
    monitor = one(
        render({"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}}), "ServiceMonitor"
    )
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert "service.enabled is false" in render_error(
        {"serviceMonitor": {"enabled": True}, "service": {"enabled": False}}
    )


def test_existing_service_account_must_be_named(
    render: Render, render_error: Callable[[dict[str, Any]], str]
) -> None:
    message = render_error({"serviceAccount": {"create": False}})
    assert "serviceAccount.name: is empty, but serviceAccount.create is false" in message
    objects = operator_objects(
        render({"serviceAccount": {"create": False, "name": "ops"}, "rbac": {"create": False}})
    )
    assert by_kind(objects, "ServiceAccount") == [] and by_kind(objects, "ClusterRole") == []
    assert one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "ops"


# --- naming -----------------------------------------------------------------------------------


def test_names_are_cut_to_63_characters_without_a_trailing_dash(render: Render) -> None:
    long_name = "x" * 62 + "-yyyy"
    objects = render({"fullnameOverride": long_name}, release="r" * 53, namespace="n" * 63)
    for obj in objects:
        name = obj["metadata"]["name"]
        assert len(name) <= 63 and not name.endswith("-"), name
        for value in obj["metadata"].get("labels", {}).values():
            assert len(str(value)) <= 63, value


# --- runtimes ---------------------------------------------------------------------------------


def runtimes_of(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["name"]: r for r in by_kind(objects, "HyperFrameRuntime")}


def matrix_runtimes() -> dict[str, dict[str, Any]]:
    docs = yaml.safe_load_all((paths.repo_root() / RUNTIMES_FILE).read_text())
    return {doc["metadata"]["name"]: doc for doc in docs if doc}


def test_default_runtimes_are_the_matrix_profiles(render: Render) -> None:
    rendered = runtimes_of(render())
    expected = matrix_runtimes()
    assert set(rendered) == set(expected)
    for name, runtime in rendered.items():
        assert runtime["spec"] == expected[name]["spec"]
        assert runtime["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"


def test_profiles_override_by_deep_merge_add_and_exclude(
    render: Render, render_error: Callable[[dict[str, Any]], str]
) -> None:
    expected = matrix_runtimes()
    first, *rest = sorted(expected)
    base_spec = expected[first]["spec"]
    custom = {"accelerator": "cpu", "images": base_spec["images"], "versions": base_spec["versions"]}
    values = {
        "runtimes": {"exclude": rest, "profiles": {first: {"pod": {"shmSize": "3Gi"}}, "custom": custom}}
    }
    rendered = runtimes_of(render(values))
    assert set(rendered) == {first, "custom"}
    merged = rendered[first]["spec"]
    assert merged["pod"]["shmSize"] == "3Gi"
    # Deep merge: every other key of the default profile, nested ones included, is kept.
    assert {k: v for k, v in merged["pod"].items() if k != "shmSize"} == base_spec.get("pod", {})
    assert {k: v for k, v in merged.items() if k != "pod"} == {
        k: v for k, v in base_spec.items() if k != "pod"
    }
    assert rendered["custom"]["spec"] == custom
    assert runtimes_of(render({"runtimes": {"installDefaults": False}})) == {}
    message = render_error({"runtimes": {"exclude": ["no-such-profile"]}})
    assert '"no-such-profile" is not a default profile' in message


def test_a_misspelt_profile_field_fails_against_the_crd_schema(
    render_error: Callable[[dict[str, Any]], str],
) -> None:
    message = render_error({"runtimes": {"profiles": {"cpu": {"pod": {"shmSiz": "1Gi"}}}}})
    assert "/runtimes/profiles/cpu/pod" in message and "shmSiz" in message


# --- helm test --------------------------------------------------------------------------------


def test_helm_test_pod_runs_the_check_script_in_the_operator_image(render: Render) -> None:
    objects = render(namespace="hf-ns")
    pods = by_kind(objects, "Pod")
    [pod] = pods
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    [container] = pod["spec"]["containers"]
    assert container["image"] == operator_container(objects)["image"]
    assert container["command"][:2] == ["python", "-c"]
    assert container["command"][2] == (CHART / "files" / "helm-test.py").read_text()
    env = {e["name"]: e["value"] for e in container["env"]}
    project = [crd["metadata"]["name"] for crd, _ in load_generator().project_crds()]
    assert env["HF_CRDS"].split(",") == project
    assert env["HF_RUNTIMES"].split(",") == sorted(matrix_runtimes())
    assert env["HF_HEALTH_URL"] == "http://hf-hyperframe-operator.hf-ns.svc:8080/healthz"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert by_kind(render({"tests": {"enabled": False}}), "Pod") == []
