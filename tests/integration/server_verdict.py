"""The API server's verdict on an object, as field paths: a dry-run create (or update) over HTTPS.

kubectl prints the server's errors as prose; the Status object behind them lists each error's
field (``details.causes[].field``), which is what the parity tests compare with
``hyperframe render``'s paths. Nothing is stored: every request is ``dryRun=All``, with strict
field validation as ``kubectl apply`` does by default.
"""

from __future__ import annotations

import json
import re
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

__all__ = ["server_error_paths", "server_errors"]

_UNKNOWN_FIELD = re.compile(r'unknown field "([^"]+)"')
_NOT_CHECKED = "some validation rules were not checked"


def _client(kubeconfig: Path) -> tuple[str, ssl.SSLContext]:
    config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    context = ssl.create_default_context(cafile=cluster["certificate-authority"])
    context.load_cert_chain(user["client-certificate"], user["client-key"])
    return str(cluster["server"]), context


def server_error_paths(
    kubeconfig: Path, collection: str, obj: dict[str, Any], *, update_of: str | None = None
) -> list[str]:
    """The field paths the API server rejects ``obj`` for; [] when it accepts it."""
    errors = server_errors(kubeconfig, collection, obj, update_of=update_of)
    return [path for path, _message in errors]


def server_errors(
    kubeconfig: Path, collection: str, obj: dict[str, Any], *, update_of: str | None = None
) -> list[tuple[str, str]]:
    """(field path, message) of each error the API server rejects ``obj`` for; [] when it accepts it.

    ``collection`` is e.g. ``/apis/hyperframe.dev/v1alpha1/namespaces/ns/hyperframejobs``;
    with ``update_of`` (an object name) the request is an update of that stored object.
    """
    server, context = _client(kubeconfig)
    url = f"{server}{collection}" + (f"/{update_of}" if update_of else "")
    request = urllib.request.Request(
        f"{url}?dryRun=All&fieldValidation=Strict",
        data=json.dumps(obj).encode(),
        method="PUT" if update_of else "POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30, context=context):
            return []
    except urllib.error.HTTPError as error:
        status = json.loads(error.read() or b"{}")
    causes = status.get("details", {}).get("causes", [])
    # With a type or enum error the server skips the CEL rules and says so in a cause of its own.
    errors = [
        (str(c["field"]), str(c.get("message", "")))
        for c in causes
        if c.get("field") and _NOT_CHECKED not in c.get("message", "")
    ]
    message = str(status.get("message", ""))
    errors += [(field, message) for field in _UNKNOWN_FIELD.findall(message)]
    return errors or [(f"(no field: {message})", message)]
