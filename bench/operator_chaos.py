"""Operator chaos at scale: jobs arrive while the leader is SIGKILLed again and again and the API
server is restarted once; at the end every count that shows a fault must be zero.

    .venv/bin/python -m bench.operator_chaos [--jobs 100] [--pods 4] [--kill-every 15] [--json]

On a private local cluster (simulated GPU nodes) whose kube-apiserver writes an audit log
(:mod:`bench.audit`), two operator replicas (``python -m hyperframe.controller``, real processes)
elect a leader with a Lease. A replica that exits (killed, or stepping down when the API server is
away) is started again as a fresh process, as its Deployment would. Meanwhile:

- ``--clients`` threads create the jobs, spread evenly over ``--arrival`` seconds;
- every ``--kill-every`` seconds (counted from the last takeover) the replica holding the Lease is
  SIGKILLed: no release, the Lease must expire;
- once, ``--apiserver-restart-at`` seconds in, the API server is stopped and started again;
- a job whose phase is Running has its rank-0 pod finish with exit code 0 (the simulated kubelet's
  annotation), so jobs also go through Succeeded under the faults.

After the last kill the run waits for a takeover and for every job to be Succeeded. It then counts, from the audit
log: pods created twice under one name (a (job, generation, rank) made twice), writes of a replica
outside its leadership term; from the jobs: those not Succeeded (stuck), and the gang restarts
(the faults touch no pod, so any restart is a defect; a gang whose creates a leader change cut
short is completed from ``status.gangCreation``, see docs/operator.md). It prints them with the number of
kills, takeovers, the takeover times and the wall time. ``run_chaos`` is what
``tests/integration/test_operator_chaos.py`` runs, smaller.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hyperframe.constants import GROUP, JOB_PLURAL, LABEL_GENERATION, LABEL_JOB, LABEL_RANK, VERSION
from hyperframe_devcluster import ClusterConfig, LocalCluster, poll
from hyperframe_devcluster.config import free_ports
from hyperframe_devcluster.sim import ANNOTATION_EXIT_CODE

from bench.audit import analyse, enable_audit, read_audit, restart_apiserver
from bench.cluster_load import TRANSIENT, ApiClients, bench_job, bench_runtime, pct

REPO = Path(__file__).resolve().parents[1]
LEASE = "hf-chaos"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChaosSettings:
    jobs: int = 100
    pods_per_job: int = 4
    clients: int = 4
    arrival_s: float = 60.0
    """The creates are spread evenly over this many seconds."""
    kill_every_s: float = 15.0
    """A leader is SIGKILLed this long after it took over (or after the previous kill)."""
    min_kills: int = 4
    """Kills before the chaos ends (it also lasts until every job was created)."""
    apiserver_restart_at_s: float = 30.0
    lease_seconds: float = 6.0
    renew_deadline_seconds: float = 4.0
    retry_seconds: float = 1.0
    settle_timeout_s: float = 240.0
    """After the chaos: how long every job gets to reach Succeeded."""


@dataclass(slots=True)
class ChaosReport:
    jobs: int
    pods_per_job: int
    kills: int = 0
    replica_starts: int = 0
    apiserver_restarts: int = 0
    apiserver_down_s: float = 0.0
    takeovers: int = 0
    takeover_after_kill_s: list[float] = field(default_factory=list)
    pod_creates: int = 0
    pods_created: set[str] = field(default_factory=set)
    duplicate_pods: list[str] = field(default_factory=list)
    operator_writes: int = 0
    writes_outside_term: list[str] = field(default_factory=list)
    stuck_jobs: list[str] = field(default_factory=list)
    restarted_jobs: list[str] = field(default_factory=list)
    """Jobs with a gang restart, and why (none of the faults touches a pod, so each is a defect)."""
    max_restarts: int = 0
    phases: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("pods_created", "duplicate_pods", "writes_outside_term", "stuck_jobs", "restarted_jobs"):
            out[key] = len(getattr(self, key))
        takeovers = self.takeover_after_kill_s
        out["takeover_after_kill_s"] = (
            {"p50": round(pct(takeovers, 0.5), 1), "max": round(max(takeovers), 1)} if takeovers else {}
        )
        return out


class Replica:
    """One operator process; its identity is what it logs at start (and sends as its user agent)."""

    def __init__(self, settings: Mapping[str, str], log_path: Path) -> None:
        liveness, metrics = free_ports(2)
        self.metrics_port = metrics
        env = {k: v for k, v in os.environ.items() if not k.startswith("HYPERFRAME_")}
        env.update(settings)
        env.update(HYPERFRAME_LIVENESS_PORT=str(liveness), HYPERFRAME_METRICS_PORT=str(metrics))
        self.log_path = log_path
        with log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "hyperframe.controller"], env=env, stdout=log, stderr=subprocess.STDOUT
            )
        self._identity: str | None = None

    @property
    def identity(self) -> str | None:
        if self._identity is None:
            match = re.search(r"operator started as (\S+):", self.log_path.read_text(errors="replace"))
            self._identity = match.group(1) if match else None
        return self._identity

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.alive:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


class _Replicas:
    """Two replicas kept alive, as a Deployment of two would."""

    def __init__(self, settings: Mapping[str, str], log_dir: Path, report: ChaosReport) -> None:
        self._settings = settings
        self._log_dir = log_dir
        self._report = report
        self.members: list[Replica] = []
        self.keep_up()

    def keep_up(self) -> None:
        self.members = [r for r in self.members if r.alive]
        while len(self.members) < 2:
            self._report.replica_starts += 1
            path = self._log_dir / f"replica-{self._report.replica_starts:02d}.log"
            self.members.append(Replica(self._settings, path))

    def holding(self, holder: str) -> Replica | None:
        return next((r for r in self.members if r.alive and r.identity == holder), None)

    def stop(self) -> None:
        for replica in self.members:
            replica.stop()


def _settings(kubeconfig: Path, namespace: str, s: ChaosSettings) -> dict[str, str]:
    return {
        "KUBECONFIG": str(kubeconfig),
        "HYPERFRAME_LEASE_NAME": LEASE,
        "HYPERFRAME_LEASE_NAMESPACE": namespace,
        "HYPERFRAME_LEASE_DURATION_SECONDS": str(s.lease_seconds),
        "HYPERFRAME_LEASE_RENEW_DEADLINE_SECONDS": str(s.renew_deadline_seconds),
        "HYPERFRAME_LEASE_RETRY_SECONDS": str(s.retry_seconds),
        "HYPERFRAME_NAMESPACES": namespace,
        "HYPERFRAME_STATUS_PORT": "0",
        "HYPERFRAME_RESTART_BACKOFF_SECONDS": "0.5",
        "HYPERFRAME_RESTART_BACKOFF_MAX_SECONDS": "2",
        "HYPERFRAME_LOG_FORMAT": "text",
    }


class _Arrivals:
    """The creates, paced: job i is sent ``i * arrival_s / jobs`` seconds after the start."""

    def __init__(self, api: ApiClients, jobs: list[dict[str, Any]], arrival_s: float) -> None:
        self.errors: list[str] = []
        self.done = threading.Event()
        interval = arrival_s / max(1, len(jobs))
        start = time.monotonic()

        def work(k: int) -> None:
            for i in range(k, len(jobs), api.clients):
                delay = start + i * interval - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                self._create(api, jobs[i])

        self._threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(api.clients)]
        for thread in self._threads:
            thread.start()
        threading.Thread(target=self._join, daemon=True).start()

    def _create(self, api: ApiClients, job: Mapping[str, Any]) -> None:
        meta = job["metadata"]
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{meta['namespace']}/{JOB_PLURAL}"
        while True:  # an API server being restarted refuses connections for a while
            try:
                conn = api.connection()
                try:
                    status, answer = api.request(conn, "POST", path, job)
                finally:
                    conn.close()
            except TRANSIENT:
                time.sleep(0.5)
                continue
            if status in (201, 409):
                return
            if status >= 500:
                time.sleep(0.5)
                continue
            self.errors.append(f"{meta['name']}: HTTP {status} {answer}")
            return

    def _join(self) -> None:
        for thread in self._threads:
            thread.join()
        self.done.set()


def _lease_holder(api: ApiClients, namespace: str) -> str:
    try:
        lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{LEASE}")
    except (*TRANSIENT, RuntimeError):
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def _finish_running(api: ApiClients, namespace: str, finished: set[str]) -> dict[str, dict[str, Any]]:
    """Rank 0 of every Running job exits 0 (once per job); the jobs by name."""
    try:
        jobs = api.get(f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{JOB_PLURAL}")["items"]
        pods = api.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    except (*TRANSIENT, RuntimeError):
        return {}
    by_name = {str(j["metadata"]["name"]): j for j in jobs}
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        job = by_name.get(str(labels.get(LABEL_JOB)))
        if job is None or labels.get(LABEL_RANK) != "0" or job["metadata"]["name"] in finished:
            continue
        st = job.get("status") or {}
        if st.get("phase") != "Running" or labels.get(LABEL_GENERATION) != str(st.get("gangGeneration", 0)):
            continue
        if pod["status"].get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
            continue
        try:
            api.patch(
                f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}",
                {"metadata": {"annotations": {ANNOTATION_EXIT_CODE: "0"}}},
            )
        except (*TRANSIENT, RuntimeError):
            continue
        finished.add(str(job["metadata"]["name"]))
    return by_name


def run_chaos(
    cluster: LocalCluster, s: ChaosSettings, work_dir: Path, *, say: Callable[[str], None] = print
) -> ChaosReport:
    """The run described in the module docstring, on ``cluster`` (whose API server it restarts)."""
    started = time.monotonic()
    report = ChaosReport(jobs=s.jobs, pods_per_job=s.pods_per_job)
    audit_dir = work_dir / "audit"
    enable_audit(cluster, audit_dir)
    kubectl = cluster.kubectl
    kubectl.run("apply", "-f", str(REPO / "crds"))
    kubectl.run("wait", "--for=condition=Established", "crd/hyperframejobs.hyperframe.dev", "--timeout=60s")
    kubectl.run("apply", "--validate=false", "-f", "-", input=json.dumps(bench_runtime()))
    namespace = "chaos"
    kubectl.run("create", "namespace", namespace)
    poll(
        lambda: kubectl.run("get", "sa", "default", "-n", namespace, check=False).returncode,
        lambda rc: rc == 0,
        timeout_s=60,
        what="default SA",
    )
    api = ApiClients(cluster, s.clients)
    replicas = _Replicas(_settings(cluster.config.kubeconfig, namespace, s), work_dir, report)
    names = [f"chaos-{i:03d}" for i in range(s.jobs)]
    finished: set[str] = set()
    jobs: dict[str, dict[str, Any]] = {}
    try:
        holder = poll(lambda: _lease_holder(api, namespace), bool, timeout_s=120, what="a leader")
        t0 = time.monotonic()
        arrivals = _Arrivals(api, [bench_job(n, namespace, pods=s.pods_per_job) for n in names], s.arrival_s)
        last_change, killed_at = time.monotonic(), 0.0

        def track(*, kill: bool) -> None:
            """Note a takeover; with ``kill``, SIGKILL a leader that has led for kill_every_s."""
            nonlocal holder, last_change, killed_at
            replicas.keep_up()
            now = time.monotonic()
            current = _lease_holder(api, namespace)
            if current and current != holder:
                if killed_at:
                    report.takeover_after_kill_s.append(now - killed_at)
                    killed_at = 0.0
                holder, last_change = current, now
            leader = replicas.holding(holder) if holder else None
            if kill and leader is not None and not killed_at and now - last_change >= s.kill_every_s:
                leader.kill()
                report.kills += 1
                killed_at = last_change = time.monotonic()
                say(f"{now - t0:5.1f} s: SIGKILL leader {holder} (kill {report.kills})")

        while report.kills < s.min_kills or not arrivals.done.is_set():
            track(kill=True)
            if not report.apiserver_restarts and time.monotonic() - t0 >= s.apiserver_restart_at_s:
                say(f"{time.monotonic() - t0:5.1f} s: restarting the API server")
                down = time.monotonic()
                restart_apiserver(cluster)
                report.apiserver_down_s = round(time.monotonic() - down, 1)
                report.apiserver_restarts += 1
            jobs = _finish_running(api, namespace, finished)
            time.sleep(0.5)
        if arrivals.errors:
            raise RuntimeError(f"{len(arrivals.errors)} creates failed, first: {arrivals.errors[0]}")
        say(f"{time.monotonic() - t0:5.1f} s: chaos over; waiting for a leader and every job to succeed")
        deadline = time.monotonic() + s.settle_timeout_s
        while time.monotonic() < deadline:
            track(kill=False)
            jobs = _finish_running(api, namespace, finished)
            phases = [str((jobs.get(n, {}).get("status") or {}).get("phase")) for n in names]
            if not killed_at and all(p == "Succeeded" for p in phases):
                break
            time.sleep(1.0)
    finally:
        replicas.stop()
    for name in names:
        st = jobs.get(name, {}).get("status") or {}
        phase = str(st.get("phase"))
        report.phases[phase] = report.phases.get(phase, 0) + 1
        if phase != "Succeeded":
            report.stuck_jobs.append(f"{name}: {phase}")
        report.max_restarts = max(report.max_restarts, int(st.get("restarts", 0) or 0))
        if st.get("restarts", 0) or st.get("gangGeneration", 0):
            why: dict[str, Any] = next(
                (c for c in st.get("conditions") or () if c.get("type") == "Restarting"), {}
            )
            report.restarted_jobs.append(
                f"{name}: restarts {st.get('restarts', 0)}, gang generation {st.get('gangGeneration', 0)}: "
                f"last Restarting condition {why.get('reason')}: {why.get('message')}"
            )
    findings = analyse(read_audit(audit_dir), lease=(namespace, LEASE), lease_seconds=s.lease_seconds)
    report.takeovers = findings.takeovers
    report.pod_creates = findings.pod_creates
    report.pods_created = findings.pods_created
    report.duplicate_pods = findings.duplicate_pods
    report.operator_writes = findings.operator_writes
    report.writes_outside_term = findings.outside_term
    report.wall_s = round(time.monotonic() - started, 1)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = ChaosSettings()
    parser.add_argument("--jobs", type=int, default=defaults.jobs)
    parser.add_argument("--pods", type=int, default=defaults.pods_per_job)
    parser.add_argument("--clients", type=int, default=defaults.clients)
    parser.add_argument("--arrival", type=float, default=defaults.arrival_s)
    parser.add_argument("--kill-every", type=float, default=defaults.kill_every_s)
    parser.add_argument("--kills", type=int, default=defaults.min_kills)
    parser.add_argument("--apiserver-restart-at", type=float, default=defaults.apiserver_restart_at_s)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", type=Path, help="keep the cluster state, audit log and replica logs here")
    args = parser.parse_args()
    settings = ChaosSettings(
        jobs=args.jobs,
        pods_per_job=args.pods,
        clients=args.clients,
        arrival_s=args.arrival,
        kill_every_s=args.kill_every,
        min_kills=args.kills,
        apiserver_restart_at_s=args.apiserver_restart_at,
    )
    nodes = max(4, -(-settings.jobs * settings.pods_per_job // 8) + 2)
    with tempfile.TemporaryDirectory(prefix="hf-chaos-") as scratch:
        tmp = str(args.keep or scratch)
        Path(tmp).mkdir(parents=True, exist_ok=True)
        cluster = LocalCluster(
            ClusterConfig(state_dir=Path(tmp) / "cluster", gpu_nodes=nodes, die_with_parent=True)
        )
        cluster.up(reuse=False)
        try:
            report = run_chaos(cluster, settings, Path(tmp))
        finally:
            cluster.down()
    summary = report.summary()
    summary["load_1m"] = round(os.getloadavg()[0], 1)
    if args.json:
        print(json.dumps(summary))
    else:
        for key, value in summary.items():
            print(f"{key}: {value}")
        details = report.writes_outside_term, report.duplicate_pods, report.stuck_jobs, report.restarted_jobs
        for line in [line for lines in details for line in lines[:10]]:
            print(f"  {line}")
    failed = (
        report.duplicate_pods or report.writes_outside_term or report.stuck_jobs or report.max_restarts > 1
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
