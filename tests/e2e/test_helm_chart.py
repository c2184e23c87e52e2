"""The chart against a real API server: install, `helm test`, a job under the chart's RBAC, upgrade, uninstall.

One private local cluster serves this module (started fresh, so the CRDs are really installed
by the chart, not found already there). The tests run in file order and build on each other's
cluster state, which each test states at its top:

1. docs/install.md, every command verbatim (install, check, run a job, upgrade, uninstall);
2. `helm template` passes a server-side dry run, for several value sets;
3. a misspelt value fails `helm install` with a schema error and creates nothing;
4. the ServiceAccount can do what the operator needs and cannot read Secrets or delete nodes;
5. with `crds.keep` switched off by `helm upgrade`, uninstall deletes the CRDs.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_support import (
    CHART,
    REPO,
    Helm,
    HostKubelet,
    HostOperator,
    deployment_env,
    doc_commands,
    elapsed,
    run_check_script,
    token_kubeconfig,
    tool_dir,
    wait_established,
    wait_gone,
)
from hyperframe.images.repo import RUNTIMES_FILE
from hyperframe_devcluster.cluster import LocalCluster
from hyperframe_devcluster.config import ClusterConfig
from hyperframe_devcluster.kube import Kubectl

pytestmark = pytest.mark.cluster

RELEASE = "hyperframe-operator"
RELEASE_NS = "hyperframe-system"
API_FILE = CHART / "files" / "api.yaml"
HYPERFRAME_CRDS: list[str] = yaml.safe_load(API_FILE.read_text())["crds"]
ALL_CRDS = list(HYPERFRAME_CRDS)


@pytest.fixture(scope="module")
def chart_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    state = tmp_path_factory.mktemp("helm-cluster")
    # No GPU nodes: the docs example is a CPU job, and every simulated node costs start-up time.
    config = ClusterConfig(
        state_dir=state, gpu_nodes=0, system_nodes=1, die_with_parent=True, start_timeout_s=120
    )
    cluster = LocalCluster(config)
    cluster.up(reuse=False)
    try:
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(scope="module")
def kube(chart_cluster: LocalCluster) -> Kubectl:
    return chart_cluster.kubectl


@pytest.fixture(scope="module")
def helm(chart_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(chart_cluster.config.kubeconfig, tmp_path_factory.mktemp("helm-home"))


def matrix_runtimes() -> dict[str, dict[str, Any]]:
    docs = yaml.safe_load_all((REPO / RUNTIMES_FILE).read_text())
    return {doc["metadata"]["name"]: doc["spec"] for doc in docs if doc}


def run_doc_command(command: str, kube: Kubectl, helm: Helm, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**helm.env(), "PATH": f"{tool_dir(tmp)}:{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True, timeout=400, check=False
    )


# --- 1. docs/install.md -------------------------------------------------------------------------


def test_install_md_commands_work_and_the_operator_runs_a_job_with_the_charts_rbac(
    kube: Kubectl, helm: Helm, tmp_path: Path
) -> None:
    commands = list(doc_commands(REPO / "docs" / "install.md"))
    assert any(c.startswith("helm install") for c in commands) and any(
        c.startswith("helm uninstall") for c in commands
    )
    operator: HostOperator | None = None
    kubelet: HostKubelet | None = None
    timings: list[str] = []
    try:
        for command in commands:
            if command.startswith("helm uninstall") and operator is not None:
                operator.stop()
            start = time.monotonic()
            result = run_doc_command(command, kube, helm, tmp_path)
            timings.append(f"{elapsed(start):>7}  {command}")
            context = f"`{command}` exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
            if operator is not None:
                context += f"\n--- host operator log ---\n{operator.log_tail()}"
            if (tmp_path / "helm-test-output.txt").exists():
                context += (
                    f"\n--- helm test script output ---\n{(tmp_path / 'helm-test-output.txt').read_text()}"
                )
            if kubelet is not None and kubelet.errors:
                context += f"\n--- host kubelet errors ---\n{kubelet.errors}"
            assert result.returncode == 0, context
            if command.startswith("helm install"):
                notes = result.stdout.split("NOTES:", 1)[-1]
                assert "kubectl apply -f examples/" in notes and f"helm test {RELEASE}" in notes, (
                    result.stdout
                )
                check_installed(kube)
                # The operator's pod is simulated; run the real operator here, as the chart's SA.
                operator = HostOperator(
                    kubeconfig=token_kubeconfig(kube, RELEASE_NS, RELEASE, tmp_path / "sa.kubeconfig"),
                    log_path=tmp_path / "operator.log",
                    chart_env=deployment_env(kube, RELEASE_NS, RELEASE),
                )
                operator.start()  # returns once /healthz answers, as a readiness probe would
                kubelet = HostKubelet(kube, RELEASE_NS, tmp_path, operator)
                kubelet.start()
            elif command.startswith("helm test"):
                assert kubelet is not None and list(kubelet.test_pod_results.values()) == [0], context
                output = (tmp_path / "helm-test-output.txt").read_text()
                assert output.count("PASS") == len(HYPERFRAME_CRDS) + 3 and "FAIL" not in output, output
            elif command.startswith("kubectl get hyperframeruntimes"):
                for name in matrix_runtimes():
                    assert name in result.stdout, result.stdout
            elif command.startswith("helm upgrade"):
                assert deployment_env(kube, RELEASE_NS, RELEASE)["HYPERFRAME_LOG_LEVEL"] == "DEBUG"
                history = yaml.safe_load(helm.run("history", RELEASE, "-n", RELEASE_NS, "-o", "yaml").stdout)
                assert [h["status"] for h in history] == ["superseded", "deployed"]
                check_runtimes_match_matrix(kube)
            elif command.startswith("helm uninstall"):
                wait_gone(kube, "deployment", RELEASE, "-n", RELEASE_NS)
                assert (
                    kube.run(
                        "get", "clusterrole", "-l", f"app.kubernetes.io/instance={RELEASE}", "-o", "name"
                    ).stdout
                    == ""
                )
                # crds.keep (the default): the API and every object of it survive.
                wait_established(kube, ALL_CRDS)
        assert kubelet is not None and kubelet.finished_pods, "no rank-0 pod was ever Running"
        assert operator is not None
        log = tmp_path.joinpath("operator.log").read_text()
        # Sufficient RBAC: the operator was never refused anything along the whole lifecycle.
        assert "Forbidden" not in log and " 403" not in log, operator.log_tail(200)
        job = kube.json("get", "hyperframejob", "cpu-tiny", "-n", "ml")
        assert job["status"]["phase"] == "Succeeded"
    finally:
        if kubelet is not None:
            kubelet.stop()
        if operator is not None:
            operator.stop()
        print("\n".join(timings))


def check_installed(kube: Kubectl) -> None:
    wait_established(kube, ALL_CRDS)
    for kind in ("deployment", "serviceaccount", "service"):
        kube.run("get", kind, RELEASE, "-n", RELEASE_NS)
    for kind in ("clusterrole", "clusterrolebinding"):
        kube.run("get", kind, f"{RELEASE_NS}-{RELEASE}")
    check_runtimes_match_matrix(kube)


def without_server_defaults(installed: Any, expected: Any) -> Any:
    """`installed` cut down to the keys of `expected`: the API server adds the schema's defaults."""
    if isinstance(installed, dict) and isinstance(expected, dict):
        return {k: without_server_defaults(installed[k], v) for k, v in expected.items() if k in installed}
    return installed


def check_runtimes_match_matrix(kube: Kubectl) -> None:
    installed = {r["metadata"]["name"]: r["spec"] for r in kube.json("get", "hyperframeruntimes")["items"]}
    expected = matrix_runtimes()
    assert set(expected) <= set(installed)
    for name, spec in expected.items():
        assert without_server_defaults(installed[name], spec) == spec, name


def test_helm_test_script_fails_naming_each_broken_check(kube: Kubectl, tmp_path: Path) -> None:
    # After test 1: the CRDs are kept, but no operator answers, and `ml`'s default account has no
    # rights to read CRDs. The `helm test` script must fail, and say why, check by check.
    script = (CHART / "files" / "helm-test.py").read_text()
    env = {
        "HF_CRDS": ",".join(HYPERFRAME_CRDS),
        "HF_API_VERSION": yaml.safe_load(API_FILE.read_text())["apiVersion"],
        "HF_RUNTIMES": "no-such-runtime",
        "HF_HEALTH_URL": "http://127.0.0.1:9/healthz",
    }
    result = run_check_script(kube, script, env, "default", "ml", tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("FAIL")] == [
        *(f"FAIL CRD {name}" for name in HYPERFRAME_CRDS),
        "FAIL runtimes",
        "FAIL operator http",
    ], result.stdout
    assert "403" in result.stdout and "Connection refused" in result.stdout
    # Discovery is open to every authenticated user, so "served" still passes.
    assert any(line.startswith("PASS API ") for line in lines), result.stdout


# --- 2. server-side dry run -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"watchNamespaces": ["ml"], "rbac": {"podGroups": {"enabled": True}}, "replicaCount": 2},
        {
            "crds": {"keep": False},
            "operator": {"leaderElection": {"enabled": False}},
            "service": {"enabled": False},
        },
    ],
    ids=["defaults", "namespaced-podgroups-ha", "no-keep-standalone"],
)
def test_template_passes_a_server_side_dry_run(
    kube: Kubectl, helm: Helm, tmp_path: Path, values: dict[str, Any]
) -> None:
    # The CRDs exist (kept by test 1), so the runtimes can be checked too.
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    kube.run("create", "namespace", "dry-run", check=False)
    # A dry run creates nothing, so the test pod's own ServiceAccount (in the same manifest)
    # would be missing when the pod is admitted: create just that one for real.
    kube.run("create", "serviceaccount", "dry-hyperframe-operator-test", "-n", "dry-run", check=False)
    manifest = helm.run("template", "dry", str(CHART), "-n", "dry-run", "-f", str(values_file)).stdout
    result = kube.run("apply", "--dry-run=server", "-f", "-", input=manifest, check=False)
    assert result.returncode == 0, result.stderr
    kinds = {line.split("/", 1)[0] for line in result.stdout.splitlines()}
    assert {
        "deployment.apps",
        "clusterrole.rbac.authorization.k8s.io",
        "customresourcedefinition.apiextensions.k8s.io",
    } <= kinds
    assert "hyperframeruntime.hyperframe.dev" in kinds


# --- 3. schema ------------------------------------------------------------------------------------


def test_misspelt_value_fails_the_install_and_creates_nothing(kube: Kubectl, helm: Helm) -> None:
    result = helm.run(
        "install",
        "typo",
        str(CHART),
        "-n",
        "typo",
        "--create-namespace",
        "--set",
        "crds.keeep=true",
        check=False,
    )
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert "keeep" in result.stderr
    assert helm.run("list", "-A", "-q").stdout.split() == []


# --- 4. least privilege ---------------------------------------------------------------------------


# What the chart's ServiceAccount may do when it watches only namespace `ml`.
CAN_I: list[tuple[str, str, str | None, bool]] = [
    ("create", "pods", "ml", True),
    ("patch", "hyperframejobs.hyperframe.dev --subresource=status", "ml", True),
    ("watch", "hyperframeruntimes.hyperframe.dev", None, True),
    ("create", "tokenreviews.authentication.k8s.io", None, True),
    ("update", "leases.coordination.k8s.io", RELEASE_NS, True),
    ("list", "nodes", None, True),
    ("get", "secrets", "ml", False),
    ("list", "secrets", RELEASE_NS, False),
    ("delete", "nodes", None, False),
    ("create", "pods", "kube-system", False),
    ("create", "pods", "default", False),
    ("create", "hyperframeruntimes.hyperframe.dev", None, False),
    ("update", "hyperframejobs.hyperframe.dev", "ml", False),
    ("update", "leases.coordination.k8s.io", "ml", False),
    ("create", "podgroups.scheduling.volcano.sh", "ml", False),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", None, False),
]


def test_service_account_can_only_do_what_the_operator_needs(kube: Kubectl, helm: Helm) -> None:
    # Test 1 left the CRDs (kept) behind; this release adopts them (same name and namespace).
    helm.run("install", RELEASE, str(CHART), "-n", RELEASE_NS, "--set", "watchNamespaces={ml}", "--wait")
    user = f"--as=system:serviceaccount:{RELEASE_NS}:{RELEASE}"
    wrong = []
    try:
        for verb, resource, namespace, allowed in CAN_I:
            ns = ["-n", namespace] if namespace else []
            result = kube.run("auth", "can-i", verb, *resource.split(), *ns, user, check=False)
            if result.stdout.strip() != ("yes" if allowed else "no"):
                wrong.append(f"can-i {verb} {resource} {ns}: {result.stdout.strip()} {result.stderr.strip()}")
    finally:
        helm.run("uninstall", RELEASE, "-n", RELEASE_NS, "--wait")
    assert wrong == []


# --- 5. crds.keep: false ----------------------------------------------------------------------------


def test_keep_switched_off_by_upgrade_makes_uninstall_delete_the_crds(kube: Kubectl, helm: Helm) -> None:
    # Install again, adopting the kept CRDs; then turn crds.keep off the way a user would.
    helm.run("install", RELEASE, str(CHART), "-n", RELEASE_NS, "--set", "tests.enabled=false", "--wait")
    kube.run("get", "hyperframeruntimes", "cpu")
    helm.run(
        "upgrade",
        RELEASE,
        str(CHART),
        "-n",
        RELEASE_NS,
        "--reuse-values",
        "--set",
        "crds.keep=false",
        "--wait",
    )
    for crd in kube.json("get", "crd", *ALL_CRDS)["items"]:
        assert "helm.sh/resource-policy" not in crd["metadata"].get("annotations", {}), crd["metadata"][
            "name"
        ]
    helm.run("uninstall", RELEASE, "-n", RELEASE_NS, "--wait")
    for crd in ALL_CRDS:
        wait_gone(kube, "crd", crd)
    # Deleting the CRDs deleted every object of their kinds, as values.yaml warns.
    assert kube.run("api-resources", "--api-group=hyperframe.dev", "-o", "name").stdout.strip() == ""
