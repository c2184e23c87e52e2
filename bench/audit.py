"""The API server's audit log as evidence: who wrote what, and whether it held the Lease then.

Not a bench itself. :func:`enable_audit` restarts a local cluster's kube-apiserver with the same
command line plus an audit policy that records every write (and the Lease writes with their
bodies); :func:`restart_apiserver` restarts it again mid-run (a new audit file per instance).
:func:`read_audit` and :func:`analyse` turn the files into counts: duplicate pod creates and
writes made by an operator replica outside its leadership term.

A term of replica R, as the API server saw it, begins when a Lease write naming R as holder is
stored after a write naming another holder (or none), and ends at the earliest of: the next stored
Lease write naming another holder (a takeover or a release), and R's last stored renewal plus the
lease duration (from then on any standby may take over). A write of R (any verb but get, list and
watch, on anything but the Lease) is *outside its term* unless it was received after a term of R
began and completed before that term ended.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from hyperframe.controller.kube import USER_AGENT_PREFIX
from hyperframe_devcluster import LocalCluster
from hyperframe_devcluster.supervisor import Supervisor

__all__ = ["AuditFindings", "Term", "analyse", "enable_audit", "read_audit", "restart_apiserver"]

_APISERVER = "kube-apiserver"
_WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Request",
            "verbs": ["create", "update", "patch"],
            "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}],
        },
        {"level": "Metadata", "verbs": sorted(_WRITE_VERBS)},
        {"level": "None"},
    ],
}


def _command(cluster: LocalCluster) -> list[str]:
    pid = cluster.pid(_APISERVER)
    if pid is None:
        raise RuntimeError(f"{_APISERVER} of {cluster.config.state_dir} is not running")
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return [a.decode() for a in argv if a]


def _relaunch(cluster: LocalCluster, command: Sequence[str]) -> None:
    supervisor = Supervisor(cluster.config)
    supervisor.stop(_APISERVER)
    supervisor.launch(_APISERVER, list(command))
    supervisor.wait(_APISERVER, "/readyz", cluster.apiserver_ready)


def enable_audit(cluster: LocalCluster, directory: Path) -> None:
    """Restart the API server with an audit policy writing to ``directory/audit-0.log``."""
    directory.mkdir(parents=True, exist_ok=True)
    policy = directory / "policy.yaml"
    policy.write_text(yaml.safe_dump(_POLICY))
    command = [a for a in _command(cluster) if not a.startswith("--audit-")]
    command += [f"--audit-policy-file={policy}", f"--audit-log-path={directory / 'audit-0.log'}"]
    _relaunch(cluster, command)


def restart_apiserver(cluster: LocalCluster) -> None:
    """Stop the API server (SIGTERM) and start it again; its audit log goes on in a new file."""
    command = _command(cluster)
    for i, arg in enumerate(command):
        if arg.startswith("--audit-log-path="):
            path = Path(arg.split("=", 1)[1])
            index = int(path.stem.rsplit("-", 1)[1]) + 1
            command[i] = f"--audit-log-path={path.with_name(f'audit-{index}.log')}"
    _relaunch(cluster, command)


def read_audit(directory: Path) -> list[dict[str, Any]]:
    """Every ResponseComplete event of every audit file in ``directory``."""
    events: list[dict[str, Any]] = []
    for path in sorted(directory.glob("audit-*.log")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:  # a line cut by the server's stop
                continue
            if event.get("stage") == "ResponseComplete":
                events.append(event)
    return events


def _time(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def _replica(event: Mapping[str, Any]) -> str | None:
    agent = str(event.get("userAgent") or "")
    if not agent.startswith(USER_AGENT_PREFIX):
        return None
    return agent[len(USER_AGENT_PREFIX) :].split("/", 1)[0]


def _code(event: Mapping[str, Any]) -> int:
    return int((event.get("responseStatus") or {}).get("code") or 0)


@dataclass(frozen=True, slots=True)
class Term:
    holder: str
    start: float
    end: float


@dataclass(slots=True)
class AuditFindings:
    terms: list[Term]
    operator_writes: int
    """Writes of the operator's replicas, Lease writes excluded (dry runs and refused ones included)."""
    outside_term: list[str] = field(default_factory=list)
    """One line per write made outside the writer's term."""
    pod_creates: int = 0
    """Pod creates the API server answered 201 (a create stored while the server was being stopped
    may never be answered; its retry is answered 409 and is in ``pods_created`` only)."""
    pods_created: set[str] = field(default_factory=set)
    """Every pod some create was answered 201 or 409 (already exists) for."""
    duplicate_pods: list[str] = field(default_factory=list)
    """Pod names stored by more than one create: a (job, generation, rank) made twice."""
    takeovers: int = 0


def _terms(events: Iterable[Mapping[str, Any]], lease: tuple[str, str], lease_seconds: float) -> list[Term]:
    writes = sorted(
        (
            e
            for e in events
            if (e.get("objectRef") or {}).get("resource") == "leases"
            and ((e["objectRef"].get("namespace"), e["objectRef"].get("name")) == lease)
            and _code(e) in (200, 201)
        ),
        key=lambda e: _time(e["stageTimestamp"]),
    )
    terms: list[Term] = []
    holder, start, last_renew = "", 0.0, 0.0

    def close(at: float) -> None:
        if holder:
            terms.append(Term(holder, start, min(at, last_renew + lease_seconds)))

    for event in writes:
        named = str(((event.get("requestObject") or {}).get("spec") or {}).get("holderIdentity") or "")
        received = _time(event["requestReceivedTimestamp"])
        if named != holder:
            close(received)
            holder, start = named, _time(event["stageTimestamp"])
        last_renew = received
    close(float("inf"))
    return terms


def analyse(
    events: Sequence[Mapping[str, Any]], *, lease: tuple[str, str], lease_seconds: float
) -> AuditFindings:
    terms = _terms(events, lease, lease_seconds)
    by_holder: dict[str, list[Term]] = {}
    for term in terms:
        by_holder.setdefault(term.holder, []).append(term)
    findings = AuditFindings(terms=terms, operator_writes=0, takeovers=max(0, len(terms) - 1))
    creates: Counter[str] = Counter()
    for event in events:
        ref = event.get("objectRef") or {}
        verb = str(event.get("verb"))
        if verb not in _WRITE_VERBS:
            continue
        dry_run = "dryRun=" in str(event.get("requestURI") or "")
        pod_create = ref.get("resource") == "pods" and verb == "create" and not ref.get("subresource")
        if pod_create and not dry_run and _code(event) in (201, 409):
            name = f"{ref.get('namespace')}/{ref.get('name')}"
            findings.pods_created.add(name)
            creates[name] += _code(event) == 201
        replica = _replica(event)
        if replica is None or ref.get("resource") == "leases":
            continue
        findings.operator_writes += 1
        received, done = _time(event["requestReceivedTimestamp"]), _time(event["stageTimestamp"])
        if not any(t.start <= received and done <= t.end for t in by_holder.get(replica, ())):
            findings.outside_term.append(
                f"{event['stageTimestamp']} {replica} {verb} {ref.get('resource')}"
                f"{'/' + str(ref['subresource']) if ref.get('subresource') else ''} "
                f"{ref.get('namespace')}/{ref.get('name')} -> {_code(event)}"
            )
    findings.pod_creates = sum(creates.values())
    findings.duplicate_pods = sorted(name for name, count in creates.items() if count > 1)
    return findings
