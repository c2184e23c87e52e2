"""Helpers for the chart's e2e tests (tests/e2e/test_helm_*.py): helm, tokens, and host stand-ins.

The local control plane simulates pods with KWOK, so no container runs. Two stand-ins replace a
kubelet where a container's work matters:

* :class:`HostOperator` runs ``python -m hyperframe.controller`` on this machine, configured
  from the ``HYPERFRAME_*`` variables of the Deployment the chart created, and authenticated
  with a TokenRequest token of the chart's ServiceAccount: the operator acts with exactly the
  chart's RBAC.
* :func:`run_test_pod_on_host` runs the ``helm test`` pod's script here with a token of the test
  pod's own ServiceAccount and reports its exit code as the pod's (through KWOK).
"""

from __future__ import annotations

import base64
import importlib.util
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml
from hyperframe.constants import LABEL_JOB, LABEL_RANK
from hyperframe_devcluster import paths
from hyperframe_devcluster.faults import finish_pod
from hyperframe_devcluster.kube import Kubectl, poll

CHART = paths.repo_root() / "charts" / "hyperframe-operator"
REPO = paths.repo_root()


@dataclass(frozen=True, slots=True)
class Helm:
    """The pinned helm against one cluster, with its config and caches kept out of $HOME."""

    kubeconfig: Path
    home: Path

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }

    def run(self, *args: str, check: bool = True, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(paths.helm()), *args],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout_s,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"helm {' '.join(args)} exited {result.returncode}:\n{result.stderr}{result.stdout}"
            )
        return result


def tool_dir(tmp: Path) -> Path:
    """A directory with `kubectl` and `helm` (the pinned binaries), to put first on PATH."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, target in (("kubectl", paths.kubectl()), ("helm", paths.helm())):
        link = bin_dir / name
        if not link.exists():
            link.symlink_to(target)
    return bin_dir


def admin_cluster_entry(kubeconfig: Path) -> dict[str, Any]:
    config = yaml.safe_load(kubeconfig.read_text())
    return dict(config["clusters"][0]["cluster"])


def token_kubeconfig(kubectl: Kubectl, namespace: str, service_account: str, path: Path) -> Path:
    """A kubeconfig that authenticates as `service_account` with a TokenRequest token."""
    token = kubectl.run("create", "token", service_account, "-n", namespace, "--duration=1h").stdout.strip()
    cluster = admin_cluster_entry(kubectl.kubeconfig)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": service_account, "user": {"token": token}}],
        "contexts": [
            {"name": "sa", "context": {"cluster": "local", "user": service_account, "namespace": namespace}}
        ],
        "current-context": "sa",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def deployment_env(kubectl: Kubectl, namespace: str, name: str) -> dict[str, str]:
    deployment = kubectl.json("get", "deployment", name, "-n", namespace)
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def _integration_harness() -> ModuleType:
    """tests/integration/operator_harness.py, which already runs the operator as a subprocess."""
    path = REPO / "tests" / "integration" / "operator_harness.py"
    spec = importlib.util.spec_from_file_location("operator_harness", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class HostOperator(_integration_harness().OperatorProcess):  # type: ignore[misc]
    """The integration tests' operator process, but configured exactly as the chart configures it.

    Only the ports (which may be taken on this machine), the credentials and the TLS files differ
    from the Deployment's environment: `kubeconfig` holds a token of the chart's ServiceAccount.
    """

    def __init__(self, kubeconfig: Path, log_path: Path, chart_env: dict[str, str]) -> None:
        super().__init__(kubeconfig, log_path)
        self.chart_env = chart_env

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HYPERFRAME_")}
        env.update(self.chart_env)
        env.update(
            KUBECONFIG=str(self.kubeconfig),
            HYPERFRAME_LIVENESS_PORT=str(self.liveness_port),
            HYPERFRAME_METRICS_PORT=str(self.metrics_port),
            HYPERFRAME_STATUS_PORT=str(self.status_port),
            # The chart's TLS Secret is mounted only in its pod: here, a test CA's files.
            HYPERFRAME_STATUS_TLS_CERT_FILE=str(self._cert),
            HYPERFRAME_STATUS_TLS_KEY_FILE=str(self._key),
            HYPERFRAME_STATUS_TLS_CA_FILE=str(self.status_ca),
            PYTHONUNBUFFERED="1",
        )
        return env

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.liveness_port}/healthz"


def run_check_script(
    kubectl: Kubectl, script: str, env: dict[str, str], service_account: str, namespace: str, tmp: Path
) -> subprocess.CompletedProcess[str]:
    """Run the chart's helm-test script here, against the real API server, as `service_account`."""
    token_file = tmp / "check.token"
    token_file.write_text(kubectl.run("create", "token", service_account, "-n", namespace).stdout.strip())
    cluster = admin_cluster_entry(kubectl.kubeconfig)
    if "certificate-authority-data" in cluster:
        ca_file = tmp / "ca.crt"
        ca_file.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    else:
        ca_file = Path(cluster["certificate-authority"])
    full_env = {**os.environ, **env}
    full_env.update(
        {"HF_API_SERVER": cluster["server"], "HF_TOKEN_FILE": str(token_file), "HF_CA_FILE": str(ca_file)}
    )
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=full_env, timeout=60, check=False
    )


def run_test_pod_on_host(kubectl: Kubectl, namespace: str, pod_name: str, health_url: str, tmp: Path) -> int:
    """Run the helm test pod's command here, as its ServiceAccount; make KWOK end the pod with its code."""
    pod = kubectl.json("get", "pod", pod_name, "-n", namespace)
    [container] = pod["spec"]["containers"]
    command = container["command"]
    assert command[:2] == ["python", "-c"], command
    env = {e["name"]: e["value"] for e in container["env"]}
    # The Service DNS name does not resolve on this machine; the operator listens here instead.
    env["HF_HEALTH_URL"] = health_url if env.get("HF_HEALTH_URL") else ""
    result = run_check_script(kubectl, command[2], env, pod["spec"]["serviceAccountName"], namespace, tmp)
    (tmp / "helm-test-output.txt").write_text(result.stdout + result.stderr)
    finish_pod(kubectl, namespace, pod_name, exit_code=result.returncode, message=result.stdout[-3000:])
    return result.returncode


@dataclass
class HostKubelet:
    """Background stand-in for the container work KWOK cannot do, while doc commands run.

    - runs the `helm test` pod's script on this machine (see run_test_pod_on_host);
    - ends the rank-0 pod of every HyperFrameJob once it is Running (its training "succeeds").
    """

    kubectl: Kubectl
    release_namespace: str
    tmp: Path
    operator: HostOperator
    test_pod_results: dict[str, int] = field(default_factory=dict)
    finished_pods: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="host-kubelet", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            try:
                self._tick()
            except Exception as error:  # reported by the test; the loop must keep serving
                self.errors.append(repr(error))

    def _tick(self) -> None:
        pods = self.kubectl.json("get", "pods", "-A", "--field-selector=status.phase=Running")["items"]
        for pod in pods:
            meta = pod["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            hook = meta.get("annotations", {}).get("helm.sh/hook")
            if (
                hook == "test"
                and meta["namespace"] == self.release_namespace
                and key not in self.test_pod_results
            ):
                self.test_pod_results[key] = run_test_pod_on_host(
                    self.kubectl, meta["namespace"], meta["name"], self.operator.health_url, self.tmp
                )
            labels = meta.get("labels", {})
            if LABEL_JOB in labels and labels.get(LABEL_RANK) == "0" and key not in self.finished_pods:
                self.finished_pods.append(key)
                finish_pod(
                    self.kubectl,
                    meta["namespace"],
                    meta["name"],
                    exit_code=0,
                    message="training done (simulated)",
                )


def doc_commands(markdown: Path) -> Iterator[str]:
    """Every command of the ```sh blocks of a Markdown file, in order (backslash continuations joined)."""
    text = markdown.read_text()
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
        for command in block.replace("\\\n", " ").splitlines():
            command = command.strip()
            if command and not command.startswith("#"):
                yield command


def wait_established(kubectl: Kubectl, crds: list[str]) -> None:
    kubectl.run("wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{name}" for name in crds))


def wait_gone(kubectl: Kubectl, *args: str, timeout_s: float = 60) -> None:
    poll(
        lambda: kubectl.run("get", *args, "--ignore-not-found", "-o", "name", check=False).stdout.strip(),
        lambda out: out == "",
        timeout_s=timeout_s,
        what=f"{' '.join(args)} deleted",
    )


def elapsed(start: float) -> str:
    return f"{time.monotonic() - start:.1f}s"
