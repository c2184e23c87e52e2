"""A minimal HTTPS client for the few API calls `up` makes itself.

Bringing the cluster up through kubectl would cost a process start plus a full API discovery
per call (the discovery cache is keyed by host:port, and the port is new each time), which
doubled the warm start time. Tests and users still use kubectl and helm.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

__all__ = ["ApiError", "RestClient"]


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path} -> HTTP {status}: {body[:500]}")
        self.status = status


@dataclass(frozen=True, slots=True)
class RestClient:
    server: str
    context: ssl.SSLContext
    timeout_s: float = 10.0

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.server + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self.context) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            raise ApiError(method, path, error.code, error.read().decode(errors="replace")) from None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def create(self, path: str, obj: dict[str, Any]) -> None:
        """POST `obj` to the collection at `path`; an object that already exists is left as is."""
        try:
            self.request("POST", path, obj)
        except ApiError as error:
            if error.status != 409:
                raise

    def exists(self, path: str) -> bool:
        try:
            self.get(path)
        except ApiError as error:
            if error.status == 404:
                return False
            raise
        return True
