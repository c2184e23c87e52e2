"""The progress endpoint: only a job's own pods, with their pod-bound token, may report for it; and
a finished job carries the trainer's final figures even when its last posts never arrived.

Tokens are minted the way the kubelet projects them into the pods: `kubectl create token` with
audience hyperframe.dev/status, bound to the pod object.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from hyperframe.api.names import configmap_name
from hyperframe.constants import (
    ENV_STATUS_TOKEN_FILE,
    ENV_STATUS_URL,
    STATUS_CA_FILE_NAME,
    STATUS_TOKEN_AUDIENCE,
)
from hyperframe_devcluster.faults import finish_pod
from hyperframe_devcluster.kube import Kubectl
from hyperframe_runtime.launcher import LaunchResult
from hyperframe_runtime.progress import ProgressReporter, ProgressUpdate, post_update, read_latest
from operator_harness import (
    OperatorProcess,
    gpu_job,
    operator,
    pod_token,
    rank_pod,
    status,
    wait,
    wait_phase,
    wait_running_gang,
)

pytestmark = pytest.mark.cluster
__all__ = ["operator"]

UPDATE = {
    "frame": 3,
    "totalFrames": 10,
    "step": 3,
    "loss": 2.5,
    "samplesPerSecond": 1200.0,
    "etaSeconds": 42.0,
}


def _token(
    kubectl: Kubectl, namespace: str, pod: dict[str, Any], audience: str = STATUS_TOKEN_AUDIENCE
) -> str:
    return pod_token(kubectl, namespace, pod, audience)


def _post(url: str, token: str | None, body: dict[str, Any], ca: Path) -> int:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    context = ssl.create_default_context(cafile=str(ca))
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_only_the_jobs_own_pods_may_report_progress(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str
) -> None:
    kubectl.apply([gpu_job("prog", namespace, nodes=1), gpu_job("other", namespace, nodes=1)])
    mine = rank_pod(wait_running_gang(operator, kubectl, namespace, "prog", nodes=1, generation=0), 0)
    theirs = rank_pod(wait_running_gang(operator, kubectl, namespace, "other", nodes=1, generation=0), 0)
    env = {e["name"]: e.get("value") for e in mine["spec"]["containers"][0].get("env", [])}
    url = env["HYPERFRAME_STATUS_URL"]
    assert url == f"{operator.status_base}/v1/namespaces/{namespace}/hyperframejobs/prog/progress"

    ca = operator.status_ca
    assert _post(url, None, UPDATE, ca) == 401
    assert _post(url, _token(kubectl, namespace, mine, audience="some-other-audience"), UPDATE, ca) == 401
    assert _post(url, _token(kubectl, namespace, theirs), UPDATE, ca) == 403, (
        "a pod of another job was let in"
    )
    assert _post(url, _token(kubectl, namespace, mine), {"frame": "three"}, ca) == 400
    assert status(kubectl, namespace, "prog").get("progress") is None

    assert _post(url, _token(kubectl, namespace, mine), UPDATE, ca) == 202
    st = wait(
        operator,
        lambda: status(kubectl, namespace, "prog"),
        lambda s: (s.get("progress") or {}).get("frame") == 3,
        what="status.progress written",
    )
    progress = st["progress"]
    assert progress["loss"] == 2.5 and progress["etaSeconds"] == 42.0 and progress["updatedAt"]
    assert st["phase"] == "Running", "a progress write does not disturb the reconcile's status"
    assert "hyperframe_progress_reports_total" in operator.metrics()


def test_the_runtime_reports_over_tls_trusting_only_the_ca_in_the_jobs_configmap(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    kubectl.apply([gpu_job("tls", namespace, nodes=1)])
    pod = rank_pod(wait_running_gang(operator, kubectl, namespace, "tls", nodes=1, generation=0), 0)
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env", [])}
    assert env[ENV_STATUS_URL].startswith("https://")
    config_map = kubectl.json("get", "configmap", configmap_name("tls"), "-n", namespace)
    ca_file = tmp_path / STATUS_CA_FILE_NAME  # what the pod sees next to job.json
    ca_file.write_text(config_map["data"][STATUS_CA_FILE_NAME])
    token_file = tmp_path / "token"
    token_file.write_text(_token(kubectl, namespace, pod))
    pod_env = {ENV_STATUS_URL: env[ENV_STATUS_URL], ENV_STATUS_TOKEN_FILE: str(token_file)}
    update = ProgressUpdate(frame=4, totalFrames=9, step=4, loss=1.5, samplesPerSecond=10.0, etaSeconds=5.0)

    # Without the operator's CA (the system store only) the endpoint is not trusted.
    assert not post_update(update, pod_env, ca_file=tmp_path / "absent.crt")
    assert post_update(update, pod_env, ca_file=ca_file)
    st = wait(
        operator,
        lambda: status(kubectl, namespace, "tls"),
        lambda s: (s.get("progress") or {}).get("frame") == 4,
        what="status.progress written from the runtime's HTTPS post",
    )
    assert st["progress"]["loss"] == 1.5
    # Plain HTTP to the TLS port gets no answer a client could mistake for acceptance.
    plain = env[ENV_STATUS_URL].replace("https://", "http://", 1)
    assert not post_update(update, {**pod_env, ENV_STATUS_URL: plain}, ca_file=ca_file)


def test_a_job_shorter_than_the_write_interval_ends_with_its_final_figures(
    operator: OperatorProcess, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    """The real node's case: 20 frames end before the last post reaches status. Rank 0's reporter
    keeps each update in its file (as under the launcher); its posts after the first never arrive
    (the pod exits first); the launcher's termination message carries the file's last update."""
    kubectl.apply([gpu_job("short", namespace, nodes=1)])
    pod = rank_pod(wait_running_gang(operator, kubectl, namespace, "short", nodes=1, generation=0), 0)
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env", [])}
    token_file = tmp_path / "token"
    token_file.write_text(_token(kubectl, namespace, pod))
    pod_env = {ENV_STATUS_URL: env[ENV_STATUS_URL], ENV_STATUS_TOKEN_FILE: str(token_file)}

    def post_first_only(update: ProgressUpdate) -> bool:
        return update.frame == 0 and post_update(update, pod_env, ca_file=operator.status_ca)

    latest = tmp_path / "progress-short-node0.json"
    reporter = ProgressReporter(
        ProgressUpdate(
            frame=0,
            totalFrames=20,
            step=0,
            loss=float("nan"),
            samplesPerSecond=float("nan"),
            etaSeconds=float("nan"),
        ),
        post=post_first_only,
        interval=3600,
        latest_file=latest,
    )
    try:
        wait(
            operator,
            lambda: status(kubectl, namespace, "short"),
            lambda s: (s.get("progress") or {}).get("totalFrames") == 20,
            what="the first post in status.progress",
        )
        for frame in range(1, 21):
            reporter.report(
                ProgressUpdate(
                    frame=frame,
                    totalFrames=20,
                    step=frame,
                    loss=4.0 - frame / 10,
                    samplesPerSecond=512.0,
                    etaSeconds=(20 - frame) * 0.1,
                )
            )
    finally:
        reporter.close()
    message = LaunchResult(ok=True, exit_code=0, reason="all ranks finished", progress=read_latest(latest))
    finish_pod(
        kubectl, namespace, pod["metadata"]["name"], exit_code=0, message=message.to_termination_message()
    )

    st = wait_phase(operator, kubectl, namespace, "short", "Succeeded")
    progress = st.get("progress") or {}
    assert (progress.get("frame"), progress.get("totalFrames"), progress.get("step")) == (20, 20, 20), st
    assert progress["loss"] == 2.0 and progress["samplesPerSecond"] == 512.0 and progress["etaSeconds"] == 0.0
    assert progress["updatedAt"]

    # A post that arrives after the verdict (a heartbeat, a slow rank) is refused: the figures are final.
    late = ProgressUpdate(frame=19, totalFrames=20, step=19, loss=9.0, samplesPerSecond=1.0, etaSeconds=1.0)
    assert (
        _post(env[ENV_STATUS_URL], _token(kubectl, namespace, pod), late.to_wire(), operator.status_ca) == 409
    )
    assert status(kubectl, namespace, "short")["progress"] == progress
