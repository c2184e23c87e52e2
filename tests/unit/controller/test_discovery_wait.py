"""A replica starting while the API server (re)starts waits until discovery serves the job kinds.

kopf resolves the resources it watches once, after the startup handlers, and afterwards only when a
CRD changes; the chaos run (bench/operator_chaos.py) saw a replica started during an API server
restart log "Unresolved resources cannot be served" and, as the leader, reconcile no job. Here a
real local HTTP server first answers the group's discovery with 503 and 404, then with a listing
that lacks the runtimes, then with both kinds; the start-up wait must return only after that.
"""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hyperframe.constants import GROUP, JOB_PLURAL, RUNTIME_PLURAL, VERSION
from hyperframe.controller.app import Controller
from hyperframe.controller.config import OperatorConfig
from hyperframe.controller.kube import KubeApi
from hyperframe.controller.metrics import Metrics
from slow_apiserver import api_client

_ANSWERS: list[tuple[int, dict[str, Any]]] = [
    (503, {"kind": "Status", "message": "storage is (re)initializing"}),
    (404, {"kind": "Status", "message": "the server could not find the requested resource"}),
    (200, {"kind": "APIResourceList", "resources": [{"name": JOB_PLURAL}]}),
    (200, {"kind": "APIResourceList", "resources": [{"name": JOB_PLURAL}, {"name": RUNTIME_PLURAL}]}),
]


def test_the_start_waits_until_discovery_serves_jobs_and_runtimes() -> None:
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            asked.append(self.path)
            status, body = _ANSWERS[min(len(asked), len(_ANSWERS)) - 1]
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        kube = KubeApi(api_client(url, "replica"), qps=100, burst=100, workers=2, metrics=Metrics())
        controller = Controller(OperatorConfig())
        asyncio.run(asyncio.wait_for(controller._wait_served(kube), timeout=30))
        kube.close()
    finally:
        server.shutdown()
        server.server_close()
    assert asked == [f"/apis/{GROUP}/{VERSION}"] * len(_ANSWERS)
