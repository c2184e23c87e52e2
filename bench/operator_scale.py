"""Operator scale: N HyperFrameJobs x 4 pods created by K concurrent clients on simulated GPU nodes.

    .venv/bin/python -m bench.operator_scale [--jobs 100,500] [--clients 20] [--nodes M]
        [--qps 200 --burst 400] [--workers 16] [--json]

For each N, in a fresh namespace and with a freshly started operator (``python -m
hyperframe.controller``, so its peak RSS belongs to that N), K client threads create the N jobs
(one-GPU-per-pod jobs of 4 pods; client k sends jobs k, k + K, ...; each on its own kept-alive
connection, as fast as the API server answers), and the bench measures, from watch events that
this process receives (``kubectl get -w``):

- apply -> all pods created: from the moment the job's create was sent to the ADDED event of its
  4th pod (p50/p99);
- apply -> Running: to the event showing ``status.phase: Running``;
- arrival: jobs/s at which the K clients got their creates answered;
- jobs/s with pods: N / (first create sent -> last job with all 4 pods), the operator's
  throughput when jobs arrive faster than it can create pods; jobs/s Running likewise;
- API requests per job: the operator's own ``hyperframe_api_requests_total`` / N, by verb and
  resource (kopf's watch streams are 3 long-lived requests and not counted);
- operator peak RSS (VmHWM) and CPU seconds of the operator, each control-plane process and
  this bench (its client threads and kubectl watches), over the run: on a small machine the
  component whose CPU is near the run's wall time x cores is what bounds the rate;
- the same less what each process uses with no job arriving (measured for 10 s before the first
  create: node leases and heartbeats of the simulated nodes, resyncs) times the run's length:
  what the jobs cost, apart from how long the run took.

The cluster is private to the run (``--nodes`` GPU nodes of 8 GPUs each, default enough for the
largest N); numbers depend on the machine and its load, and are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from hyperframe.constants import LABEL_JOB
from hyperframe_devcluster import ClusterConfig, LocalCluster, poll
from hyperframe_devcluster.config import free_ports
from hyperframe_devcluster.kube import Kubectl

from bench.cluster_load import (
    PODS_PER_JOB,
    ApiClients,
    CpuClock,
    bench_job,
    bench_runtime,
    operator_metrics,
    pct,
    requests_by_kind,
)

REPO = Path(__file__).resolve().parents[1]
IDLE_S = 10.0


class Watch:
    """``kubectl get -w`` printing one line per event; records this process's receipt time.

    A watch that ends (the server closed it, or kubectl failed at start) is started again; events
    are then seen twice, which the first-seen rules of the measurement ignore."""

    def __init__(self, kubectl: Kubectl, args: list[str]) -> None:
        self.lines: list[tuple[float, str]] = []
        self._command = kubectl.command(*args)
        self._stopped = False
        self._proc = self._start()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _start(self) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self._command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1
        )

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _read(self) -> None:
        while not self._stopped:
            assert self._proc.stdout is not None
            for line in self._proc.stdout:
                self.lines.append((time.monotonic(), line.strip()))
            self._proc.wait()
            if not self._stopped:
                time.sleep(0.5)
                self._proc = self._start()

    def stop(self) -> None:
        self._stopped = True
        self._proc.terminate()
        self._proc.wait(timeout=10)


def _peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(match.group(1)) / 1024 if match else float("nan")


def _metrics_or_none(port: int) -> str | None:
    try:
        return operator_metrics(port)
    except OSError:
        return None


def _reconciles(text: str) -> float:
    for line in text.splitlines():
        if line.startswith("hyperframe_reconcile_duration_seconds_count"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_one(
    cluster: LocalCluster, n: int, *, clients: int, qps: float, burst: int, workers: int, log_dir: Path
) -> dict[str, Any]:
    kubectl = cluster.kubectl
    namespace = f"bench-{n}-{clients}"
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
        KUBECONFIG=str(cluster.config.kubeconfig),
        HYPERFRAME_LEASE_NAME="",
        HYPERFRAME_LOG_FORMAT="text",
        HYPERFRAME_LOG_LEVEL="WARNING",
        HYPERFRAME_STATUS_PORT="0",
        HYPERFRAME_LIVENESS_PORT=str(liveness),
        HYPERFRAME_METRICS_PORT=str(metrics_port),
        HYPERFRAME_API_QPS=str(qps),
        HYPERFRAME_API_BURST=str(burst),
        HYPERFRAME_WORKERS=str(workers),
    )
    log = (log_dir / f"operator-{n}-{clients}.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hyperframe.controller"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    api = ApiClients(cluster, clients)
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
        cpu = CpuClock.of_cluster(
            cluster, {"operator": proc.pid, "kubectl job watch": jobs_w.pid, "kubectl pod watch": pods_w.pid}
        )
        # What the cluster costs with no job arriving (node leases and heartbeats, resyncs): charged
        # to the run at this rate over its length, it is not what the jobs cost.
        cpu.start()
        time.sleep(IDLE_S)
        idle = {name: used / IDLE_S for name, used in cpu.used().items()}
        cpu.start()
        clock_started = time.monotonic()
        bench_cpu = _self_cpu()
        before = operator_metrics(metrics_port)
        names = [f"job-{i:04d}" for i in range(n)]
        sent = api.create_jobs([bench_job(name, namespace) for name in names])
        arrived = time.monotonic()

        def running() -> int:
            return len({line.split()[0] for _, line in jobs_w.lines if line.endswith(" Running")})

        poll(running, lambda count: count >= n, timeout_s=600 + 2 * n, what=f"{n} jobs Running", interval_s=1)
        after = operator_metrics(metrics_port)
        used = cpu.used()
        measured_s = time.monotonic() - clock_started
        used["bench clients"] = round(_self_cpu() - bench_cpu, 1)
        peak = _peak_rss_mb(proc.pid)
        jobs_w.stop()
        pods_w.stop()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        kubectl.run("delete", "namespace", namespace, "--wait=false", check=False)

    up: dict[str, float] = {}
    for stamp, line in jobs_w.lines:
        parts = line.split()
        if len(parts) > 1 and parts[1] == "Running":
            up.setdefault(parts[0], stamp)
    pod_times: dict[str, dict[str, float]] = {}
    for stamp, line in pods_w.lines:
        parts = line.split()
        if len(parts) == 2:
            pod_times.setdefault(parts[0], {}).setdefault(parts[1], stamp)
    all_pods = {j: max(pod_times[j].values()) for j in names if len(pod_times.get(j, {})) >= PODS_PER_JOB}
    created = [all_pods[j] - sent[j] for j in all_pods]
    to_running = [up[j] - sent[j] for j in names if j in up]
    first = min(sent.values())
    window = max(up.values()) - first
    requests = requests_by_kind(after)
    for kind, count in requests_by_kind(before).items():
        requests[kind] = requests.get(kind, 0.0) - count
    per_job = {k: round(v / n, 2) for k, v in sorted(requests.items()) if v}
    return {
        "jobs": n,
        "pods": n * PODS_PER_JOB,
        "clients": clients,
        "qps": qps,
        "burst": burst,
        "workers": workers,
        "pods_created_p50_s": round(pct(created, 0.5), 3),
        "pods_created_p99_s": round(pct(created, 0.99), 3),
        "running_p50_s": round(pct(to_running, 0.5), 3),
        "running_p99_s": round(pct(to_running, 0.99), 3),
        "arrival_jobs_per_s": round(n / max(arrived - first, 1e-3), 1),
        "jobs_with_pods_per_s": round(n / (max(all_pods.values()) - first), 1) if all_pods else 0.0,
        "jobs_running_per_s": round(n / window, 1),
        "reconciles_per_job": round((_reconciles(after) - _reconciles(before)) / n, 1),
        "api_requests_per_job": round(sum(requests.values()) / n, 1),
        "api_requests_per_job_by_kind": per_job,
        "operator_peak_rss_mb": round(peak, 1),
        "window_s": round(window, 1),
        "cpu_s": used,
        "idle_cpu_s_per_s": {k: round(v, 3) for k, v in idle.items()},
        "cpu_s_over_idle": {k: round(v - idle.get(k, 0.0) * measured_s, 1) for k, v in used.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default="100,500", help="comma-separated N values")
    parser.add_argument("--clients", type=int, default=20, help="concurrent clients creating the jobs")
    parser.add_argument(
        "--nodes", type=int, default=0, help="simulated GPU nodes (default: enough for the largest N)"
    )
    parser.add_argument("--qps", type=float, default=200.0)
    parser.add_argument("--burst", type=int, default=400)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--crds", type=Path, default=REPO / "crds", help="CRD directory to install")
    args = parser.parse_args()
    sizes = [int(x) for x in args.jobs.split(",") if x]
    nodes = args.nodes or max(4, math.ceil(max(sizes) * PODS_PER_JOB / 8) + 2)
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
            kubectl.run("apply", "--validate=false", "-f", "-", input=json.dumps(bench_runtime()))
            for n in sizes:
                result = run_one(
                    cluster,
                    n,
                    clients=args.clients,
                    qps=args.qps,
                    burst=args.burst,
                    workers=args.workers,
                    log_dir=Path(tmp),
                )
                result["nodes"] = nodes
                result["load_1m"] = round(os.getloadavg()[0], 1)
                print(json.dumps(result) if args.json else _row(result), flush=True)
        finally:
            cluster.down()
    return 0


def _row(r: dict[str, Any]) -> str:
    cpu = ", ".join(f"{k} {v}" for k, v in sorted(r["cpu_s"].items(), key=lambda kv: -kv[1]))
    over = ", ".join(f"{k} {v}" for k, v in sorted(r["cpu_s_over_idle"].items(), key=lambda kv: -kv[1]))
    idle = sum(v for v in r["idle_cpu_s_per_s"].values() if v == v)  # nan (a process gone) left out
    kinds = ", ".join(f"{k} {v}" for k, v in r["api_requests_per_job_by_kind"].items())
    return (
        f"N={r['jobs']} pods={r['pods']} clients={r['clients']} nodes={r['nodes']} qps={r['qps']}/"
        f"{r['burst']} workers={r['workers']}: pods created p50 {r['pods_created_p50_s']}s "
        f"p99 {r['pods_created_p99_s']}s | Running p50 {r['running_p50_s']}s p99 {r['running_p99_s']}s | "
        f"arrival {r['arrival_jobs_per_s']} jobs/s, with pods {r['jobs_with_pods_per_s']} jobs/s, Running "
        f"{r['jobs_running_per_s']} jobs/s | {r['reconciles_per_job']} reconciles/job | "
        f"{r['api_requests_per_job']} API req/job ({kinds}) | peak RSS {r['operator_peak_rss_mb']} MB | "
        f"CPU s over {r['window_s']} s: {cpu} | idle cluster {idle:.2f} CPU s/s; over idle: {over} | "
        f"load {r['load_1m']}"
    )


if __name__ == "__main__":
    sys.exit(main())
