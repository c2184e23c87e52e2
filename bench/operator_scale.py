"""Operator scale: N HyperFrameJobs x 4 pods on M simulated GPU nodes (KWOK), N = 10, 100, 500.

    .venv/bin/python bench/operator_scale.py [--jobs 10,100,500] [--nodes M] [--qps 50 --burst 100] [--json]

For each N, in a fresh namespace and with a freshly started operator (``python -m
hyperframe.controller``, so its peak RSS belongs to that N), it applies N one-GPU-per-pod jobs of 4
pods at once and measures, from watch events received by this process:

- apply -> all pods created: from the job's ADDED event to its 4th pod's ADDED event (p50/p99);
- apply -> Running: from the job's ADDED event to the event showing ``status.phase: Running``;
- jobs reconciled per second: N / (first job seen -> last job Running), and reconciles/s from the
  operator's own ``hyperframe_reconcile_duration_seconds_count``;
- operator peak RSS (VmHWM) and API requests per job (``hyperframe_api_requests_total`` / N; kopf's
  watch streams are not counted, they are 3 long-lived requests in total).

The cluster is private to the run (``--nodes`` GPU nodes of 8 GPUs each, default enough for the
largest N); numbers depend on the machine and its load, and are printed, never asserted.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from hyperframe.constants import LABEL_JOB
from hyperframe_devcluster import ClusterConfig, LocalCluster, poll
from hyperframe_devcluster.config import free_ports
from hyperframe_devcluster.kube import Kubectl

REPO = Path(__file__).resolve().parents[1]
PODS_PER_JOB = 4
RUNTIME = "bench-gpu"


def _runtime() -> dict[str, Any]:
    doc = next(
        d
        for d in yaml.safe_load_all((REPO / "examples/gpu-pipeline.yaml").read_text())
        if d["kind"] == "HyperFrameRuntime"
    )
    doc = copy.deepcopy(doc)
    doc["metadata"] = {"name": RUNTIME}
    doc["spec"]["pod"]["resources"] = {"cpu": "1", "memory": "4Gi"}
    return dict(doc)


def _job(name: str, namespace: str) -> dict[str, Any]:
    doc = next(
        d
        for d in yaml.safe_load_all((REPO / "examples/gpu-pipeline.yaml").read_text())
        if d["kind"] == "HyperFrameJob"
    )
    doc = copy.deepcopy(doc)
    doc["metadata"] = {"name": name, "namespace": namespace}
    spec = doc["spec"]
    spec.update(
        runtimeRef={"name": RUNTIME},
        nodes=PODS_PER_JOB,
        gpusPerNode=1,
        parallelism={"pipeline": 4, "data": 1},
    )
    spec.pop("volumes", None)
    spec["frames"].pop("checkpoint", None)
    spec.pop("runtimeOverrides", None)
    spec["runPolicy"] = {"backoffLimit": 1}
    return dict(doc)


class Watch:
    """``kubectl get -w`` printing one line per event; records this process's receipt time."""

    def __init__(self, kubectl: Kubectl, args: list[str]) -> None:
        self.lines: list[tuple[float, str]] = []
        self._proc = subprocess.Popen(kubectl.command(*args), stdout=subprocess.PIPE, text=True, bufsize=1)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self.lines.append((time.monotonic(), line.strip()))

    def stop(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {"api": 0.0, "reconciles": 0.0}
    for line in text.splitlines():
        if line.startswith("hyperframe_api_requests_total"):
            out["api"] += float(line.rsplit(" ", 1)[1])
        elif line.startswith("hyperframe_reconcile_duration_seconds_count"):
            out["reconciles"] = float(line.rsplit(" ", 1)[1])
    return out


def _peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(match.group(1)) / 1024 if match else float("nan")


def run_one(
    kubectl: Kubectl, kubeconfig: Path, n: int, *, qps: float, burst: int, log_dir: Path
) -> dict[str, Any]:
    namespace = f"bench-{n}"
    kubectl.run("create", "namespace", namespace)
    poll(
        lambda: kubectl.run("get", "sa", "default", "-n", namespace, check=False).returncode,
        lambda rc: rc == 0,
        timeout_s=60,
        what="default SA",
    )
    liveness, metrics_port = free_ports(2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYPERFRAME_")}
    env.update(
        KUBECONFIG=str(kubeconfig),
        HYPERFRAME_LEASE_NAME="",
        HYPERFRAME_LOG_FORMAT="text",
        HYPERFRAME_LOG_LEVEL="WARNING",
        HYPERFRAME_STATUS_PORT="0",
        HYPERFRAME_LIVENESS_PORT=str(liveness),
        HYPERFRAME_METRICS_PORT=str(metrics_port),
        HYPERFRAME_API_QPS=str(qps),
        HYPERFRAME_API_BURST=str(burst),
    )
    log = (log_dir / f"operator-{n}.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hyperframe.controller"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        poll(
            lambda: _metrics_or_none(metrics_port),
            lambda m: m is not None,
            timeout_s=60,
            what="operator metrics",
        )
        jobs_w = Watch(
            kubectl,
            [
                "get",
                "hyperframejobs",
                "-n",
                namespace,
                "-w",
                "-o",
                'jsonpath={.metadata.name} {.status.phase}{"\\n"}',
            ],
        )
        label = LABEL_JOB.replace(".", "\\.")
        pods_w = Watch(
            kubectl,
            [
                "get",
                "pods",
                "-n",
                namespace,
                "-w",
                "-o",
                f'jsonpath={{.metadata.labels.{label}}} {{.metadata.name}}{{"\\n"}}',
            ],
        )
        time.sleep(2)  # let both watches establish before the first object appears
        before = _metrics(metrics_port)
        names = [f"job-{i:04d}" for i in range(n)]
        body = json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": [_job(name, namespace) for name in names]}
        )
        kubectl_long = Kubectl(kubeconfig, timeout_s=600)
        kubectl_long.run("apply", "--validate=false", "-f", "-", input=body)

        def running() -> int:
            return len({line.split()[0] for _, line in jobs_w.lines if line.endswith(" Running")})

        poll(running, lambda count: count >= n, timeout_s=600 + 2 * n, what=f"{n} jobs Running", interval_s=1)
        after = _metrics(metrics_port)
        peak = _peak_rss_mb(proc.pid)
        jobs_w.stop()
        pods_w.stop()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        kubectl.run("delete", "namespace", namespace, "--wait=false", check=False)

    seen: dict[str, float] = {}
    up: dict[str, float] = {}
    for stamp, line in jobs_w.lines:
        parts = line.split()
        if not parts:
            continue
        seen.setdefault(parts[0], stamp)
        if len(parts) > 1 and parts[1] == "Running":
            up.setdefault(parts[0], stamp)
    pod_times: dict[str, dict[str, float]] = {}
    for stamp, line in pods_w.lines:
        parts = line.split()
        if len(parts) == 2:
            pod_times.setdefault(parts[0], {}).setdefault(parts[1], stamp)
    created = [
        max(pod_times[j].values()) - seen[j] for j in names if len(pod_times.get(j, {})) >= PODS_PER_JOB
    ]
    to_running = [up[j] - seen[j] for j in names if j in up]
    window = max(up.values()) - min(seen.values())
    return {
        "jobs": n,
        "pods": n * PODS_PER_JOB,
        "qps": qps,
        "burst": burst,
        "pods_created_p50_s": round(_pct(created, 0.5), 3),
        "pods_created_p99_s": round(_pct(created, 0.99), 3),
        "running_p50_s": round(_pct(to_running, 0.5), 3),
        "running_p99_s": round(_pct(to_running, 0.99), 3),
        "jobs_running_per_s": round(n / window, 2),
        "reconciles_per_s": round((after["reconciles"] - before["reconciles"]) / window, 1),
        "api_requests_per_job": round((after["api"] - before["api"]) / n, 1),
        "operator_peak_rss_mb": round(peak, 1),
        "window_s": round(window, 1),
        "median_pods_seen": statistics.median(len(v) for v in pod_times.values()) if pod_times else 0,
    }


def _metrics_or_none(port: int) -> dict[str, float] | None:
    try:
        return _metrics(port)
    except OSError:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default="10,100,500", help="comma-separated N values")
    parser.add_argument(
        "--nodes", type=int, default=0, help="simulated GPU nodes (default: enough for the largest N)"
    )
    parser.add_argument("--qps", type=float, default=50.0)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--crds", type=Path, default=REPO / "crds", help="CRD directory to install")
    args = parser.parse_args()
    sizes = [int(x) for x in args.jobs.split(",") if x]
    nodes = args.nodes or max(4, math.ceil(max(sizes) * PODS_PER_JOB / 8) + 2)
    results = []
    with tempfile.TemporaryDirectory(prefix="hf-opbench-") as tmp:
        cluster = LocalCluster(
            ClusterConfig(state_dir=Path(tmp) / "cluster", gpu_nodes=nodes, die_with_parent=True)
        )
        cluster.up(reuse=False)
        try:
            kubectl = cluster.kubectl
            kubectl.run("apply", "-f", str(args.crds))
            kubectl.run(
                "wait", "--for=condition=Established", "crd/hyperframejobs.hyperframe.dev", "--timeout=60s"
            )
            kubectl.run("apply", "--validate=false", "-f", "-", input=json.dumps(_runtime()))
            for n in sizes:
                result = run_one(
                    kubectl, cluster.config.kubeconfig, n, qps=args.qps, burst=args.burst, log_dir=Path(tmp)
                )
                result["nodes"] = nodes
                results.append(result)
                print(json.dumps(result) if args.json else _row(result), flush=True)
        finally:
            cluster.down()
    return 0


def _row(r: dict[str, Any]) -> str:
    return (
        f"N={r['jobs']:>4} pods={r['pods']:>5} nodes={r['nodes']}: pods created p50 {r['pods_created_p50_s']}s "
        f"p99 {r['pods_created_p99_s']}s | Running p50 {r['running_p50_s']}s p99 {r['running_p99_s']}s | "
        f"{r['jobs_running_per_s']} jobs/s, {r['reconciles_per_s']} reconciles/s | "
        f"{r['api_requests_per_job']} API req/job | peak RSS {r['operator_peak_rss_mb']} MB"
    )


if __name__ == "__main__":
    sys.exit(main())
