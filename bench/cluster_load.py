"""What the operator benches share: concurrent API clients, CPU accounting per process, the
operator's own request counters, and the job and runtime they apply. Not a bench itself.
"""

from __future__ import annotations

import copy
import http.client
import json
import math
import os
import re
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hyperframe.constants import GROUP, JOB_PLURAL, VERSION
from hyperframe_devcluster import LocalCluster
from hyperframe_devcluster.probes import apiserver_context

__all__ = [
    "CONTROL_PLANE",
    "PODS_PER_JOB",
    "RUNTIME",
    "TRANSIENT",
    "ApiClients",
    "CpuClock",
    "bench_job",
    "bench_runtime",
    "operator_metrics",
    "pct",
    "requests_by_kind",
]

REPO = Path(__file__).resolve().parents[1]
PODS_PER_JOB = 4
RUNTIME = "bench-gpu"
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
TRANSIENT = (OSError, http.client.HTTPException)
"""What a request raises while the API server is away (refused, reset, cut short)."""


def _example(kind: str) -> dict[str, Any]:
    for doc in yaml.safe_load_all((REPO / "examples/gpu-pipeline.yaml").read_text()):
        if doc and doc.get("kind") == kind:
            return copy.deepcopy(dict(doc))
    raise LookupError(f"examples/gpu-pipeline.yaml has no {kind}")


def bench_runtime() -> dict[str, Any]:
    doc = _example("HyperFrameRuntime")
    doc["metadata"] = {"name": RUNTIME}
    doc["spec"]["pod"]["resources"] = {"cpu": "1", "memory": "4Gi"}
    return doc


def bench_job(name: str, namespace: str, *, pods: int = PODS_PER_JOB) -> dict[str, Any]:
    """examples/gpu-pipeline.yaml's job as ``pods`` one-GPU pods (a pipeline of that many stages),
    without PVC or checkpoints."""
    doc = _example("HyperFrameJob")
    doc["metadata"] = {"name": name, "namespace": namespace}
    spec = doc["spec"]
    spec.update(
        runtimeRef={"name": RUNTIME},
        nodes=pods,
        gpusPerNode=1,
        parallelism={"pipeline": pods, "data": 1},
    )
    spec.pop("volumes", None)
    spec["frames"].pop("checkpoint", None)
    spec.pop("runtimeOverrides", None)
    spec["runPolicy"] = {"backoffLimit": 1}
    return doc


def pct(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def operator_metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def requests_by_kind(metrics_text: str) -> dict[str, float]:
    """``hyperframe_api_requests_total`` as {"verb resource": count}."""
    out: dict[str, float] = {}
    for line in metrics_text.splitlines():
        match = re.match(r"hyperframe_api_requests_total\{([^}]*)\} (\S+)", line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
            out[f"{labels.get('verb')} {labels.get('resource')}"] = float(match.group(2))
    return out


@dataclass(slots=True)
class CpuClock:
    """CPU seconds (user + system) that named processes used between two samples."""

    pids: dict[str, int]
    _start: dict[str, float] = field(default_factory=dict)

    @staticmethod
    def _cpu(pid: int) -> float:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        # fields[11], [12]: utime, stime (fields 14 and 15 of proc(5), counted after the name)
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS

    def start(self) -> None:
        self._start = {name: self._cpu(pid) for name, pid in self.pids.items()}

    def used(self) -> dict[str, float]:
        return {name: round(self._cpu(pid) - self._start[name], 1) for name, pid in self.pids.items()}

    @classmethod
    def of_cluster(cls, cluster: LocalCluster, more: Mapping[str, int]) -> CpuClock:
        """The control plane's processes and ``more`` ({name: pid})."""
        pids = {c: pid for c in CONTROL_PLANE if (pid := cluster.pid(c)) is not None}
        return cls({**pids, **more})


class ApiClients:
    """K threads, each with its own kept-alive HTTPS connection as the cluster admin, creating jobs
    as fast as the API server answers: the arrival of K users running ``kubectl apply`` at once,
    without a kubectl process start per job."""

    def __init__(self, cluster: LocalCluster, clients: int) -> None:
        ports = cluster.config.read_ports()
        if ports is None:
            raise RuntimeError(f"no cluster recorded in {cluster.config.state_dir}")
        pki = cluster.pki
        self._port = ports.apiserver
        self._context = apiserver_context(pki.ca_cert, pki.client_cert("admin"), pki.client_key("admin"))
        self.clients = clients

    def connection(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self._port, context=self._context, timeout=60)

    def request(
        self, conn: http.client.HTTPSConnection, method: str, path: str, body: Any = None
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body)
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None

    def create_jobs(self, jobs: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """Create every job, client k taking jobs k, k + K, ...; monotonic send time per job name."""
        sent: dict[str, float] = {}
        errors: list[str] = []

        def work(k: int) -> None:
            conn = self.connection()
            try:
                for job in jobs[k :: self.clients]:
                    meta = job["metadata"]
                    path = f"/apis/{GROUP}/{VERSION}/namespaces/{meta['namespace']}/{JOB_PLURAL}"
                    stamp = time.monotonic()
                    status, answer = self.request(conn, "POST", path, job)
                    if status != 201:
                        errors.append(f"{meta['name']}: HTTP {status} {answer}")
                    sent[str(meta["name"])] = stamp
            finally:
                conn.close()

        threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(self.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise RuntimeError(f"{len(errors)} creates failed, first: {errors[0]}")
        return sent

    def get(self, path: str) -> Any:
        conn = self.connection()
        try:
            status, answer = self.request(conn, "GET", path)
        finally:
            conn.close()
        if status != 200:
            raise RuntimeError(f"GET {path}: HTTP {status} {answer}")
        return answer

    def patch(self, path: str, body: Mapping[str, Any]) -> None:
        conn = self.connection()
        try:
            conn.request(
                "PATCH", path, body=json.dumps(body), headers={"Content-Type": "application/merge-patch+json"}
            )
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        if response.status != 200:
            raise RuntimeError(f"PATCH {path}: HTTP {response.status} {raw[:300]!r}")
