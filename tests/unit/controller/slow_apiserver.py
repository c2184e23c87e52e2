"""A real local HTTP server speaking the few API calls of a Lease election and a pod write, whose
answers to one client (told apart by its user agent) can be made to fail fast and then hang.

It enforces the API server's resourceVersion precondition on the Lease and records, on the test
process's monotonic clock, when each Lease write landed and when each pod write arrived.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hyperframe.controller.kube import USER_AGENT_PREFIX, api_client_for
from kubernetes import client

LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
PODS = "/api/v1/namespaces/ns/pods"
_HANG_SECONDS = 60.0


@dataclass
class Sickness:
    """From ``since`` on, this client's requests fail with 503 for ``fail_for`` seconds, then hang."""

    since: float
    fail_for: float

    def hangs(self, now: float) -> bool:
        return now >= self.since + self.fail_for


@dataclass
class ServerState:
    lease: dict[str, Any] | None = None
    version: int = 0
    lease_writes: list[tuple[float, str]] = field(default_factory=list)
    """(when it landed, holderIdentity) of every Lease write."""
    pod_writes: list[tuple[float, str]] = field(default_factory=list)
    """(when it arrived, writer identity) of every pod write."""
    sick: dict[str, Sickness] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    released: threading.Event = field(default_factory=threading.Event)

    def took_over_at(self, identity: str) -> float:
        """When ``identity`` first wrote the Lease as its holder."""
        return next(t for t, holder in self.lease_writes if holder == identity)


def _handler(state: ServerState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _identity(self) -> str:
            agent = self.headers.get("User-Agent", "")
            return agent.removeprefix(USER_AGENT_PREFIX).partition("/")[0]

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting: what a hanging answer is for

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            decoded = json.loads(self.rfile.read(length) or b"{}")
            return decoded if isinstance(decoded, dict) else {}

        def _sick(self) -> bool:
            """Answers 503 (True) or hangs while this client is sick; False when it is healthy."""
            sickness = state.sick.get(self._identity())
            if sickness is None or time.monotonic() < sickness.since:
                return False
            if sickness.hangs(time.monotonic()):
                state.released.wait(_HANG_SECONDS)
            self._answer(503, {"kind": "Status", "message": "the API server is overloaded"})
            return True

        def do_GET(self) -> None:
            if self._sick():
                return
            with state.lock:
                lease = state.lease
            if self.path.startswith(f"{LEASES}/") and lease is not None:
                self._answer(200, lease)
            else:
                self._answer(404, {"kind": "Status", "message": "not found"})

        def do_POST(self) -> None:
            body = self._body()
            if self.path.startswith(PODS):
                with state.lock:
                    state.pod_writes.append((time.monotonic(), self._identity()))
            if self._sick():
                return
            if self.path.startswith(PODS):
                self._answer(201, body)
                return
            with state.lock:
                if state.lease is not None:
                    self._answer(409, {"kind": "Status", "message": "already exists"})
                    return
                self._answer(201, self._store(body))

        def do_PUT(self) -> None:
            body = self._body()
            if self._sick():
                return
            with state.lock:
                if state.lease is None or body["metadata"].get("resourceVersion") != str(state.version):
                    self._answer(409, {"kind": "Status", "message": "the object has been modified"})
                    return
                self._answer(200, self._store(body))

        def _store(self, body: dict[str, Any]) -> dict[str, Any]:
            state.version += 1
            body["metadata"]["resourceVersion"] = str(state.version)
            state.lease = body
            state.lease_writes.append((time.monotonic(), str(body["spec"]["holderIdentity"])))
            return body

    return Handler


@contextmanager
def slow_apiserver() -> Iterator[tuple[ServerState, str]]:
    """The server's state and its base URL, for the duration of the block."""
    state = ServerState()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="slow-apiserver", daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        state.released.set()
        server.shutdown()
        server.server_close()


def api_client(url: str, identity: str) -> Any:
    """The operator's API client set up as in production, pointed at ``url``."""
    configuration = client.Configuration()
    configuration.host = url
    return api_client_for(configuration, 8, identity=identity)
