"""Readiness probes of the components over loopback HTTP(S)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

__all__ = ["apiserver_context", "http_ok", "insecure_context"]


def apiserver_context(ca_cert: Path, client_cert: Path, client_key: Path) -> ssl.SSLContext:
    """Verifies the apiserver against the cluster CA and authenticates as a client."""
    context = ssl.create_default_context(cafile=str(ca_cert))
    context.load_cert_chain(str(client_cert), str(client_key))
    return context


def insecure_context() -> ssl.SSLContext:
    """For the controller-manager and scheduler health ports, which serve self-signed certificates."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def http_ok(
    url: str, *, context: ssl.SSLContext | None = None, expect_json: dict[str, str] | None = None
) -> bool:
    """True when GET `url` answers 200 (and, if given, a JSON body containing `expect_json`)."""
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            body = response.read()
            if response.status != 200:
                return False
    except (OSError, urllib.error.URLError, ssl.SSLError):
        return False
    if expect_json is None:
        return True
    try:
        data = json.loads(body)
    except ValueError:
        return False
    return isinstance(data, dict) and all(data.get(k) == v for k, v in expect_json.items())
