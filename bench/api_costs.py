"""What one request of each kind the operator sends costs the control plane, in CPU milliseconds.

    .venv/bin/python -m bench.api_costs [--count 400] [--clients 8] [--rounds 3] [--json]

On a private local cluster of simulated GPU nodes, K HyperFrameJobs are created (no operator runs)
and the first one's objects are rendered as the operator renders them. Then, in each round and in turn, K
client threads send ``--count`` requests of one kind, as fast as the API server answers:

- ``pod dry run``: a create of the job's rank-0 pod (a new name each time) with ``dryRun=All``;
- ``pod create``: the same pod really created (the scheduler binds it, KWOK runs it);
- ``event``: a Normal event on the job, as the operator posts one per transition;
- ``status patch``: a merge patch of one condition of a job's status, each client patching its
  own job; ``status patch, no CEL`` the same on a copy of the HyperFrameJob CRD under another
  group without its CEL rules (what the API server's evaluation of the rules costs a status
  write: it validates the whole object, spec included, on every write of the status);
- ``configmap``, ``service``: the job's ConfigMap and headless Service under new names (a
  Service costs the controller-manager its EndpointSlice too, here an empty one: its selector
  matches no pod).

After each batch the bench waits until the control plane is back at its idle rate (measured for
10 s at the start: node leases, resyncs), and charges each process's CPU seconds over the batch and
that wait, less its idle rate over the same time, to the kind. Kinds alternate within a round, so
the machine's load changes affect every kind alike; the median over the rounds is printed. The
numbers depend on the machine; they are printed, never asserted.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
from hyperframe.constants import GROUP, JOB_PLURAL, VERSION
from hyperframe.controller.events import event_body
from hyperframe.controller.plan import Event, EventType
from hyperframe.render import RenderContext, render_job
from hyperframe_devcluster import ClusterConfig, LocalCluster

from bench.cluster_load import ApiClients, CpuClock, bench_job, bench_runtime

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "api-costs"
_NO_CEL_GROUP = f"no-cel.{GROUP}"
_SETTLE_MAX_S = 30.0
_IDLE_S = 10.0
_IDLE_MARGIN = 0.05

Request = tuple[str, str, Any]
"""(method, path, body)."""


def _renamed(obj: dict[str, Any], name: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["name"] = name
    out["metadata"].pop("resourceVersion", None)
    return out


def _kinds(
    job: dict[str, Any], objects: list[dict[str, Any]], clients: int
) -> dict[str, Callable[[int, str], Request]]:
    by_kind = {o["kind"]: o for o in objects}
    pod = next(o for o in objects if o["kind"] == "Pod")
    ns = NAMESPACE
    jobs = f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{JOB_PLURAL}"

    def dry_run(i: int, tag: str) -> Request:
        return ("POST", f"/api/v1/namespaces/{ns}/pods?dryRun=All", _renamed(pod, f"dry-{tag}-{i}"))

    def create_pod(i: int, tag: str) -> Request:
        return ("POST", f"/api/v1/namespaces/{ns}/pods", _renamed(pod, f"pod-{tag}-{i}"))

    def event(i: int, tag: str) -> Request:
        body = event_body(job, Event(type=EventType.NORMAL, reason="Running", message=f"bench {tag} {i}"))
        return ("POST", f"/api/v1/namespaces/{ns}/events", body)

    def status(i: int, tag: str) -> Request:
        condition = {
            "type": "Running",
            "status": "True",
            "reason": "Running",
            "message": f"bench {tag} {i}",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        # Client k sends requests k, k + K, ...: each client patches its own job, as one worker of the
        # operator writes one job at a time (no retries on a conflict inside the API server).
        return ("PATCH", f"{jobs}/costs-{i % clients}/status", {"status": {"conditions": [condition]}})

    def configmap(i: int, tag: str) -> Request:
        return (
            "POST",
            f"/api/v1/namespaces/{ns}/configmaps",
            _renamed(by_kind["ConfigMap"], f"cm-{tag}-{i}"),
        )

    def service(i: int, tag: str) -> Request:
        body = _renamed(by_kind["Service"], f"svc-{tag}-{i}")
        # A selector of no pod: the Services of earlier rounds must not select the pods created
        # later, or each pod create would cost the controller-manager an update of every slice.
        body["spec"]["selector"] = {"api-costs.hyperframe.dev/service": f"{tag}-{i}"}
        return ("POST", f"/api/v1/namespaces/{ns}/services", body)

    def status_no_cel(i: int, tag: str) -> Request:
        _, path, body = status(i, tag)
        return ("PATCH", path.replace(f"/apis/{GROUP}/", f"/apis/{_NO_CEL_GROUP}/"), body)

    return {
        "pod dry run": dry_run,
        "pod create": create_pod,
        "event": event,
        "status patch": status,
        "status patch, no CEL": status_no_cel,
        "configmap": configmap,
        "service": service,
    }


def _send(api: ApiClients, make: Callable[[int, str], Request], count: int, tag: str) -> None:
    errors: list[str] = []

    def work(k: int) -> None:
        conn = api.connection()
        try:
            for i in range(k, count, api.clients):
                method, path, body = make(i, tag)
                headers = {
                    "Content-Type": "application/merge-patch+json"
                    if method == "PATCH"
                    else "application/json"
                }
                conn.request(method, path, body=json.dumps(body), headers=headers)
                response = conn.getresponse()
                raw = response.read()
                if response.status not in (200, 201):
                    errors.append(f"{method} {path}: HTTP {response.status} {raw[:200]!r}")
        finally:
            conn.close()

    threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(api.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"{len(errors)} of {count} requests failed, first: {errors[0]}")


def _idle_rate(cpu: CpuClock) -> dict[str, float]:
    """CPU seconds per second each process uses with no request sent (node leases, resyncs)."""
    cpu.start()
    time.sleep(_IDLE_S)
    return {name: used / _IDLE_S for name, used in cpu.used().items()}


def _without_cel(crd: dict[str, Any]) -> dict[str, Any]:
    """The HyperFrameJob CRD under another group, without its CEL rules (x-kubernetes-validations)."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "x-kubernetes-validations"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    out: dict[str, Any] = strip(crd)
    out["metadata"] = {"name": f"{JOB_PLURAL}.{_NO_CEL_GROUP}"}
    out["spec"]["group"] = _NO_CEL_GROUP
    return out


def _settle(cpu: CpuClock, idle: float) -> None:
    """Wait until the control plane is back at its idle rate (+ 5 % of a core), at most 30 s."""
    deadline = time.monotonic() + _SETTLE_MAX_S
    last = sum(cpu.used().values())
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = sum(cpu.used().values())
        if now - last < idle + _IDLE_MARGIN:
            return
        last = now


def measure(
    cluster: LocalCluster, *, count: int, clients: int, rounds: int, only: Sequence[str]
) -> dict[str, Any]:
    kubectl = cluster.kubectl
    kubectl.run("create", "namespace", NAMESPACE)
    kubectl.run("apply", "--validate=false", "-f", "-", input=json.dumps(bench_runtime()))
    crd = yaml.safe_load((REPO / "crds" / f"{GROUP}_{JOB_PLURAL}.yaml").read_text(encoding="utf-8"))
    kubectl.run("apply", "-f", "-", input=json.dumps(_without_cel(crd)))
    kubectl.run("wait", "--for=condition=Established", f"crd/{JOB_PLURAL}.{_NO_CEL_GROUP}", "--timeout=60s")
    for k in range(clients):
        doc = bench_job(f"costs-{k}", NAMESPACE)
        kubectl.run("apply", "--validate=false", "-f", "-", input=json.dumps(doc))
        doc["apiVersion"] = f"{_NO_CEL_GROUP}/{VERSION}"
        kubectl.run("apply", "--validate=false", "-f", "-", input=json.dumps(doc))
    api = ApiClients(cluster, clients)
    job = api.get(f"/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/{JOB_PLURAL}/costs-0")
    runtime = api.get(f"/apis/{GROUP}/{VERSION}/hyperframeruntimes/{bench_runtime()['metadata']['name']}")
    objects = render_job(job, runtime, RenderContext())
    kinds = {k: v for k, v in _kinds(job, objects, clients).items() if not only or k in only}
    cpu = CpuClock.of_cluster(cluster, {})
    idle = _idle_rate(cpu)
    samples: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    wall: dict[str, list[float]] = {kind: [] for kind in kinds}
    for r in range(rounds):
        for kind, make in kinds.items():
            cpu.start()
            started = time.monotonic()
            _send(api, make, count, f"r{r}")
            wall[kind].append(time.monotonic() - started)
            _settle(cpu, sum(idle.values()))
            elapsed = time.monotonic() - started
            samples[kind].append({n: used - idle[n] * elapsed for n, used in cpu.used().items()})
    out: dict[str, Any] = {}
    for kind, runs in samples.items():
        per_process = {
            name: round(statistics.median(run[name] for run in runs) * 1000 / count, 2) for name in runs[0]
        }
        out[kind] = {
            "ms_per_request": per_process,
            "control_plane_ms": round(sum(per_process.values()), 2),
            "requests_per_s": round(count / statistics.median(wall[kind]), 1),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=400, help="requests per kind per round")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kinds", default="", help="comma-separated kinds to measure (default: all)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # Nodes enough for every real pod create (8 one-GPU pods per node).
    nodes = args.count * args.rounds // 8 + 2
    with tempfile.TemporaryDirectory(prefix="hf-apicosts-") as tmp:
        cluster = LocalCluster(
            ClusterConfig(state_dir=Path(tmp) / "cluster", gpu_nodes=nodes, die_with_parent=True)
        )
        cluster.up(reuse=False)
        try:
            kubectl = cluster.kubectl
            kubectl.run("apply", "-f", str(REPO / "crds"))
            kubectl.run(
                "wait", "--for=condition=Established", "crd/hyperframejobs.hyperframe.dev", "--timeout=60s"
            )
            result = measure(
                cluster,
                count=args.count,
                clients=args.clients,
                rounds=args.rounds,
                only=[k for k in args.kinds.split(",") if k],
            )
        finally:
            cluster.down()
    load = round(os.getloadavg()[0], 1)
    if args.json:
        print(json.dumps({"count": args.count, "rounds": args.rounds, "load_1m": load, "kinds": result}))
        return 0
    print(
        f"{args.count} requests per kind per round, {args.rounds} rounds, {args.clients} clients, load {load}"
    )
    for kind, r in result.items():
        parts = ", ".join(f"{k} {v}" for k, v in sorted(r["ms_per_request"].items(), key=lambda kv: -kv[1]))
        print(
            f"{kind:>13}: {r['control_plane_ms']:6.2f} ms CPU per request ({parts}); {r['requests_per_s']} req/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
