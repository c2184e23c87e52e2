"""A validating admission webhook that holds chosen pod creates, for tests: a real fault in the API
server's admission chain, with no hook in the operator.

The webhook serves HTTPS on 127.0.0.1 (the local control plane's API server runs on the host) with
a certificate of a test CA. Creates of a job's pods of the held ranks wait in the webhook until the
test releases them; released, they are refused (the pod is never stored). Dry runs and every other
pod are admitted at once.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hyperframe.constants import LABEL_JOB, LABEL_RANK
from hyperframe_devcluster.kube import Kubectl, poll
from operator_harness import serving_certificate

__all__ = ["AdmissionHold", "admission_hold"]

_PROBE_RANK = "probe"


class AdmissionHold:
    """What the webhook saw, and the switch that releases (refuses) the held creates."""

    def __init__(self, ranks: set[str]) -> None:
        self.ranks = ranks
        self.released = threading.Event()
        self._lock = threading.Lock()
        self.held: list[str] = []
        """Names of the pods whose (real) create was held, in arrival order."""
        self.answered: list[str] = []
        """Held creates that were answered (refused) after the release."""
        self.probes = 0

    def admit(self, request: dict[str, Any]) -> tuple[bool, str]:
        obj = request.get("object") or {}
        meta = obj.get("metadata") or {}
        rank = str((meta.get("labels") or {}).get(LABEL_RANK, ""))
        name = str(meta.get("name", ""))
        if rank == _PROBE_RANK:
            with self._lock:
                self.probes += 1
            return True, ""
        if request.get("dryRun") or rank not in self.ranks or self.released.is_set():
            return True, ""
        with self._lock:
            self.held.append(name)
        self.released.wait(timeout=25)  # below the webhook's 30 s timeout
        with self._lock:
            self.answered.append(name)
        return False, f"held by the test webhook and refused: {name}"


def _handler(hold: AdmissionHold) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            request = review.get("request") or {}
            allowed, message = hold.admit(request)
            response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": allowed}
            if not allowed:
                response["status"] = {"code": 403, "message": message}
            body = json.dumps({**{k: review[k] for k in ("apiVersion", "kind")}, "response": response})
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body.encode())
            except OSError:
                pass  # the API server gave up on the call

        def log_message(self, *_: object) -> None:
            return

    return Handler


@contextmanager
def admission_hold(
    kubectl: Kubectl, namespace: str, job: str, ranks: set[str], cert_dir: Path
) -> Iterator[AdmissionHold]:
    """The webhook for pods of ``namespace``/``job``, registered and known to be called."""
    ca, cert, key = serving_certificate(cert_dir)
    hold = AdmissionHold(ranks)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hold))
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, name="admission-hold", daemon=True)
    thread.start()
    name = f"hf-test-hold-{namespace}"
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "hold.test.hyperframe.dev",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{server.server_address[1]}/validate",
                    "caBundle": base64.b64encode(ca.read_bytes()).decode(),
                },
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "objectSelector": {"matchLabels": {LABEL_JOB: job}},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 30,
                "failurePolicy": "Fail",
            }
        ],
    }
    try:
        kubectl.apply([config])
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "admission-probe",
                "namespace": namespace,
                "labels": {LABEL_JOB: job, LABEL_RANK: _PROBE_RANK},
            },
            "spec": {"containers": [{"name": "c", "image": "probe"}]},
        }
        # The API server picks a new webhook configuration up asynchronously: probe until it calls it.
        poll(
            lambda: (
                kubectl.run(
                    "create",
                    "--dry-run=server",
                    "-f",
                    "-",
                    "-o",
                    "name",
                    input=json.dumps(probe),
                    check=False,
                ),
                hold.probes,
            )[1],
            bool,
            timeout_s=30,
            what="the test webhook called by the API server",
        )
        yield hold
    finally:
        hold.released.set()
        kubectl.run("delete", "validatingwebhookconfiguration", name, "--ignore-not-found", check=False)
        server.shutdown()
        server.server_close()
