"""Running the real operator (``python -m hyperframe.controller``) against the local cluster, for tests.

One operator process per test module (``operator`` fixture), started with short backoffs and
graces so the lifecycle tests stay fast; the restart test kills and restarts it. Jobs come from the
shipped examples, so the tests exercise the same manifests users apply.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from hyperframe.constants import LABEL_GENERATION, LABEL_JOB, LABEL_RANK, STATUS_TOKEN_AUDIENCE
from hyperframe_devcluster.config import free_ports
from hyperframe_devcluster.kube import Kubectl, poll

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]
RUNTIME_NAME = "it-gpu"

TEST_SETTINGS: Mapping[str, str] = {
    "HYPERFRAME_LEASE_NAME": "",  # one replica per test module: no leader election
    "HYPERFRAME_RESTART_BACKOFF_SECONDS": "0.5",
    "HYPERFRAME_RESTART_BACKOFF_MAX_SECONDS": "2",
    "HYPERFRAME_NODE_NOT_READY_GRACE_SECONDS": "1",
    "HYPERFRAME_TERMINATING_GRACE_SECONDS": "10",
    "HYPERFRAME_PROGRESS_FLUSH_SECONDS": "1",
    "HYPERFRAME_LOG_FORMAT": "text",
}


def serving_certificate(directory: Path) -> tuple[Path, Path, Path]:
    """(CA, certificate, key) for a server on 127.0.0.1, made with openssl like a cluster's PKI."""
    ca_key, ca, key, cert = (directory / n for n in ("ca.key", "ca.crt", "tls.key", "tls.crt"))
    if cert.exists():
        return ca, cert, key

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(ca_key))
    openssl(
        "req", "-x509", "-new", "-key", str(ca_key), "-subj", "/CN=hyperframe-progress-test-ca", "-days", "2",
        "-out", str(ca), "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
    )  # fmt: skip
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key))
    csr, ext = directory / "tls.csr", directory / "tls.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    openssl("req", "-new", "-key", str(key), "-subj", "/CN=127.0.0.1", "-out", str(csr))
    openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-days", "2", "-extfile", str(ext), "-out", str(cert),
    )  # fmt: skip
    return ca, cert, key


class OperatorProcess:
    """The operator as a subprocess with its own ports and log file; progress is served over HTTPS
    with a certificate of a test CA (``status_ca``)."""

    def __init__(self, kubeconfig: Path, log_path: Path, settings: Mapping[str, str] | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.settings = dict(settings or {})
        liveness, metrics, status = free_ports(3)
        self.liveness_port, self.metrics_port, self.status_port = liveness, metrics, status
        self.status_base = f"https://127.0.0.1:{status}"
        self.status_ca, self._cert, self._key = serving_certificate(log_path.parent)
        self._proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HYPERFRAME_")}
        env.update(TEST_SETTINGS)
        env.update(self.settings)
        env.update(
            KUBECONFIG=str(self.kubeconfig),
            HYPERFRAME_LIVENESS_PORT=str(self.liveness_port),
            HYPERFRAME_METRICS_PORT=str(self.metrics_port),
            HYPERFRAME_STATUS_PORT=str(self.status_port),
            HYPERFRAME_STATUS_ENDPOINT_URL=self.status_base,
            HYPERFRAME_STATUS_TLS_CERT_FILE=str(self._cert),
            HYPERFRAME_STATUS_TLS_KEY_FILE=str(self._key),
            HYPERFRAME_STATUS_TLS_CA_FILE=str(self.status_ca),
        )
        return env

    def start(self) -> None:
        log = self.log_path.open("ab")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "hyperframe.controller"],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        poll(
            self._healthy,
            bool,
            timeout_s=60,
            what=f"operator liveness on :{self.liveness_port}\n{self.log_tail()}",
        )

    def _healthy(self) -> bool:
        if self._proc is not None and self._proc.poll() is not None:
            raise RuntimeError(f"operator exited with {self._proc.returncode}:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.liveness_port}/healthz", timeout=2) as resp:
                return int(resp.status) == 200
        except OSError:
            return False

    def stop(self, *, kill: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no operator log)"
        return "--- operator log tail ---\n" + "\n".join(text[-lines:])

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as resp:
            return str(resp.read().decode())


def install_api(kubectl: Kubectl) -> None:
    """The shipped CRDs and a GPU runtime (the example's golden profile under a test name)."""
    kubectl.run("apply", "-f", str(REPO / "crds"))
    for crd in ("hyperframejobs.hyperframe.dev", "hyperframeruntimes.hyperframe.dev"):
        kubectl.run("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
    runtime = copy.deepcopy(_example("gpu-pipeline.yaml", "HyperFrameRuntime"))
    runtime["metadata"] = {"name": RUNTIME_NAME}
    kubectl.apply([runtime])


def _example(file_name: str, kind: str) -> dict[str, Any]:
    for doc in yaml.safe_load_all((REPO / "examples" / file_name).read_text()):
        if doc and doc.get("kind") == kind:
            return dict(doc)
    raise LookupError(f"examples/{file_name} has no {kind}")


def gpu_job(
    name: str,
    namespace: str,
    *,
    nodes: int = 2,
    backoff_limit: int = 2,
    run_policy: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """examples/gpu-pipeline.yaml's job, resized to ``nodes`` x 8 GPUs, without its PVC."""
    job = copy.deepcopy(_example("gpu-pipeline.yaml", "HyperFrameJob"))
    job["metadata"] = {"name": name, "namespace": namespace}
    spec = job["spec"]
    spec["runtimeRef"] = {"name": RUNTIME_NAME}
    spec["nodes"] = nodes
    spec["parallelism"] = {"pipeline": 4, "data": 2 * nodes}
    spec.pop("volumes", None)
    spec["frames"].pop("checkpoint", None)
    spec["runPolicy"] = {"backoffLimit": backoff_limit, "cleanPodPolicy": "Running", **(run_policy or {})}
    return job


def pod_token(
    kubectl: Kubectl, namespace: str, pod: Mapping[str, Any], audience: str = STATUS_TOKEN_AUDIENCE
) -> str:
    """A token as the kubelet projects it into a job's pod: audience hyperframe.dev/status, bound to the pod."""
    account = pod["spec"].get("serviceAccountName") or "default"
    out = kubectl.run(
        "create", "token", account, "-n", namespace, "--audience", audience,
        "--bound-object-kind", "Pod", "--bound-object-name", pod["metadata"]["name"],
    )  # fmt: skip
    return out.stdout.strip()


def status(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any]:
    result = kubectl.run("get", "hyperframejob", name, "-n", namespace, "-o", "json", check=False)
    if result.returncode != 0:
        if "NotFound" in result.stderr:
            return {"_absent": True}
        raise RuntimeError(f"kubectl get hyperframejob {namespace}/{name}: {result.stderr.strip()}")
    return dict(json.loads(result.stdout).get("status") or {})


def pods(kubectl: Kubectl, namespace: str, name: str) -> list[dict[str, Any]]:
    items = kubectl.json("get", "pods", "-n", namespace, "-l", f"{LABEL_JOB}={name}")["items"]
    return [dict(p) for p in items]


def live_pods(kubectl: Kubectl, namespace: str, name: str) -> list[dict[str, Any]]:
    """Pods not being deleted."""
    return [p for p in pods(kubectl, namespace, name) if not p["metadata"].get("deletionTimestamp")]


def rank_pod(pod_list: list[dict[str, Any]], rank: int) -> dict[str, Any]:
    return next(p for p in pod_list if p["metadata"]["labels"][LABEL_RANK] == str(rank))


def generation_of(pod: Mapping[str, Any]) -> int:
    return int(pod["metadata"]["labels"][LABEL_GENERATION])


def condition(st: Mapping[str, Any], type_: str) -> dict[str, Any]:
    return next((dict(c) for c in st.get("conditions") or () if c.get("type") == type_), {})


def wait(
    op: OperatorProcess,
    fetch: Callable[[], T],
    done: Callable[[T], bool],
    *,
    what: str,
    timeout_s: float = 60,
) -> T:
    """poll() whose timeout message carries the operator's log tail."""
    try:
        return poll(fetch, done, timeout_s=timeout_s, what=what, interval_s=0.5)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\n{op.log_tail()}") from None


def wait_phase(
    op: OperatorProcess, kubectl: Kubectl, namespace: str, name: str, phase: str, timeout_s: float = 60
) -> dict[str, Any]:
    return wait(
        op,
        lambda: status(kubectl, namespace, name),
        lambda st: st.get("phase") == phase,
        what=f"{namespace}/{name} phase {phase}",
        timeout_s=timeout_s,
    )


def wait_running_gang(
    op: OperatorProcess, kubectl: Kubectl, namespace: str, name: str, *, nodes: int, generation: int
) -> list[dict[str, Any]]:
    """Wait for phase Running with exactly ``nodes`` live pods of ``generation``; returns them."""
    wait_phase(op, kubectl, namespace, name, "Running")
    return wait(
        op,
        lambda: live_pods(kubectl, namespace, name),
        lambda ps: len(ps) == nodes and all(generation_of(p) == generation for p in ps),
        what=f"{nodes} live pods of generation {generation}",
    )


@pytest.fixture(scope="module")
def operator(
    kubectl: Kubectl,
    kubeconfig: Path,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[OperatorProcess]:
    """The module's operator; a module's ``OPERATOR_SETTINGS`` (``HYPERFRAME_*`` values) go on top
    of ``TEST_SETTINGS``."""
    install_api(kubectl)
    settings: Mapping[str, str] = getattr(request.module, "OPERATOR_SETTINGS", {})
    op = OperatorProcess(kubeconfig, tmp_path_factory.mktemp("operator") / "operator.log", settings)
    op.start()
    try:
        yield op
    finally:
        op.stop()
