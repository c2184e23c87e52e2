"""`helm test` check: the operator is healthy and the HyperFrame API is served.

Runs inside the operator image with the Python standard library only (nothing is installed at
run time). Every input comes from the environment, so the same script also runs outside the
cluster (the chart's e2e test does that against the real API server):

  HF_HEALTH_URL    the operator's kopf health endpoint, e.g. http://<svc>.<ns>.svc:8080/healthz
                   (empty: skip the health check, e.g. when service.enabled is false). With leader
                   election the Service has an endpoint only once the leader has labelled its pod,
                   which can be a moment after the pods are Ready: a refused connection is retried
                   for up to HEALTH_WAIT_S.
  HF_CRDS          comma-separated CRD names that must be Established
  HF_API_VERSION   group/version whose resources must be served (discovery)
  HF_RUNTIMES      comma-separated HyperFrameRuntime names that must exist
  HF_API_SERVER    API server URL (default: the in-cluster one)
  HF_TOKEN_FILE    bearer token file (default: the pod's ServiceAccount token)
  HF_CA_FILE       CA bundle of the API server (default: the pod's ServiceAccount CA)

Prints one line per check and exits 1 if any check failed.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from typing import Any

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TIMEOUT_S = 10.0
HEALTH_WAIT_S = 15.0


def env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


class Api:
    def __init__(self) -> None:
        self.server = os.environ.get("HF_API_SERVER", "https://kubernetes.default.svc").rstrip("/")
        with open(os.environ.get("HF_TOKEN_FILE", f"{SA_DIR}/token"), encoding="utf-8") as handle:
            self.token = handle.read().strip()
        self.context = ssl.create_default_context(cafile=os.environ.get("HF_CA_FILE", f"{SA_DIR}/ca.crt"))

    def get(self, path: str) -> Any:
        request = urllib.request.Request(
            self.server + path, headers={"Authorization": f"Bearer {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=self.context) as response:
            return json.load(response)


def check_crd_established(api: Api, name: str) -> str:
    crd = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    conditions = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}
    if conditions.get("Established") != "True":
        raise RuntimeError(f"not Established (conditions: {conditions})")
    return "Established"


def check_served(api: Api, api_version: str) -> str:
    resources = [r["name"] for r in api.get(f"/apis/{api_version}").get("resources", [])]
    if not resources:
        raise RuntimeError("discovery lists no resources")
    return "serves " + ", ".join(sorted(resources))


def check_runtimes(api: Api, api_version: str, names: list[str]) -> str:
    items = api.get(f"/apis/{api_version}/hyperframeruntimes").get("items", [])
    present = {item["metadata"]["name"] for item in items}
    missing = sorted(set(names) - present)
    if missing:
        raise RuntimeError(f"missing {', '.join(missing)} (present: {', '.join(sorted(present)) or 'none'})")
    return "present: " + ", ".join(sorted(names))


def check_health(url: str) -> str:
    deadline = time.monotonic() + HEALTH_WAIT_S
    while True:
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                return f"HTTP {response.status}"
        except urllib.error.HTTPError:
            raise
        except urllib.error.URLError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(1.0)


def main() -> int:
    api = Api()
    api_version = os.environ.get("HF_API_VERSION", "")
    checks: list[tuple[str, Any]] = [
        (f"CRD {name}", lambda name=name: check_crd_established(api, name)) for name in env_list("HF_CRDS")
    ]
    if api_version:
        checks.append((f"API {api_version}", lambda: check_served(api, api_version)))
        runtimes = env_list("HF_RUNTIMES")
        if runtimes:
            checks.append(("runtimes", lambda: check_runtimes(api, api_version, runtimes)))
    health_url = os.environ.get("HF_HEALTH_URL", "")
    if health_url:
        checks.append((f"operator {health_url}", lambda: check_health(health_url)))
    else:
        print("SKIP operator health: HF_HEALTH_URL is empty (service.enabled: false)")
    failed = 0
    for title, check in checks:
        try:
            print(f"PASS {title}: {check()}")
        except (OSError, RuntimeError, KeyError, ValueError, urllib.error.URLError) as error:
            failed += 1
            print(f"FAIL {title}: {error}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
