"""Smoke-gate policy: read the gate's verdict from each pod and decide what it means for the job.

- exit 0 (PASS): the node's figures go into ``status.smokeTest``;
- exit 1 (FAIL): the gang restarts; the nodes the reports name at fault are candidates for
  exclusion (``suspect_node_ranks``, mapped to nodes through the gang's pods, and the reporting
  pod's own node when its report says ``fault: own``). A node whose report says ``other`` (it
  failed only because another node did) or ``unattributed`` (a job-wide busbw shortfall, a
  collective error) is not blamed, and neither is a node whose report cannot be read;
- exit 2 (CONFIG): the job fails at once; retrying cannot fix configuration;
- exit 3 (TIMEOUT) or anything else: the gang restarts on the same nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hyperframe.constants import SmokeExit
from hyperframe.smoke_report import Fault, SmokeReport

from .observed import ObservedPod

__all__ = ["GateFailure", "GateVerdict", "gate_nodes", "judge_gates", "merge_smoke_status", "smoke_entry"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GateFailure:
    pod: str
    node: str | None
    exit_code: int
    failed_check: str
    reason: str
    remedy: str

    @property
    def config_error(self) -> bool:
        return self.exit_code == SmokeExit.CONFIG

    def describe(self) -> str:
        where = f"node {self.node}" if self.node else f"pod {self.pod}"
        text = f"smoke gate failed on {where} ({self.failed_check}, exit {self.exit_code}): {self.reason}"
        return f"{text}; {self.remedy}" if self.remedy else text


@dataclass(frozen=True, slots=True, kw_only=True)
class GateVerdict:
    started: bool
    """At least one pod of the gang runs or ran its gate."""
    all_passed: bool
    """Every rank's gate passed (``num_nodes`` pods)."""
    failures: tuple[GateFailure, ...]
    exclude_nodes: tuple[str, ...]
    """Nodes the FAIL reports name at fault (never timeouts), in rank order: candidates for
    ``status.excludedNodes``, before the cap of :mod:`~hyperframe.controller.policy_exclusion`."""
    results: Mapping[str, Mapping[str, Any]]
    """``status.smokeTest.nodes`` entries by node for every gate that ended in this gang."""


def smoke_entry(report: SmokeReport, *, pod: ObservedPod, node: str) -> dict[str, Any]:
    """One node's entry of ``status.smokeTest.nodes``: verdict, bus bandwidth, per-device figures."""
    exit_code = pod.gate_end.exit_code if pod.gate_end is not None else report.exit_code
    passed = exit_code == SmokeExit.PASS
    devices = []
    for d in report.devices:
        if d.node_rank is not None and d.node_rank != pod.rank:
            continue
        figures = {k: v for k, v in (("tflops", d.tflops), ("memBwGBps", d.mem_bw_gbps)) if v is not None}
        devices.append({"index": d.index, "name": d.name, "passed": d.ok, "figures": figures})
    entry: dict[str, Any] = {
        "node": node,
        "rank": pod.rank,
        "gangGeneration": pod.generation,
        "passed": passed,
        "exitCode": exit_code,
        "busBandwidthGBps": report.busbw_gbps,
        "devices": devices[:64],
    }
    if not passed:
        entry["reason"] = (report.failed_check or f"exit {exit_code}")[:256]
        entry["message"] = (f"{report.reason} {report.remedy}".strip())[:4096]
    return {key: value for key, value in entry.items() if value is not None}


def gate_nodes(smoke: Mapping[str, Any] | None, generation: int) -> dict[int, str]:
    """Rank -> node of every gate of gang generation ``generation`` that ``status.smokeTest`` holds:
    where each rank's pod ran, known even after the pod is gone."""
    found: dict[int, str] = {}
    for entry in (smoke or {}).get("nodes") or ():
        if isinstance(entry, Mapping) and entry.get("gangGeneration") == generation and entry.get("node"):
            found[int(entry.get("rank", 0) or 0)] = str(entry["node"])
    return found


def merge_smoke_status(
    stored: Mapping[str, Any] | None, verdict: GateVerdict, *, generation: int
) -> dict[str, Any]:
    """``status.smokeTest`` after this reconcile: the newest result per node, job-wide figures of this gang.

    Entries of earlier generations stay (they say why a node was excluded) until that node is tested again.
    """
    nodes = {str(n.get("node")): dict(n) for n in (stored or {}).get("nodes") or () if isinstance(n, Mapping)}
    nodes.update({node: dict(entry) for node, entry in verdict.results.items()})
    current = list(verdict.results.values())
    result: dict[str, Any] = {
        "gangGeneration": generation,
        "nodes": sorted(nodes.values(), key=lambda e: (int(e.get("rank", 0)), str(e.get("node")))),
    }
    if verdict.failures:
        result["passed"] = False
    elif verdict.all_passed:
        result["passed"] = True
    bandwidths = [float(e["busBandwidthGBps"]) for e in current if e.get("busBandwidthGBps") is not None]
    if bandwidths:
        result["busBandwidthGBps"] = min(bandwidths)
    return result


def judge_gates(pods: Sequence[ObservedPod], num_nodes: int) -> GateVerdict:
    """Judge the gates of one gang generation's pods."""
    failures: list[GateFailure] = []
    at_fault: set[str] = set()
    results: dict[str, Mapping[str, Any]] = {}
    node_of_rank = {p.rank: p.node for p in pods if p.node}
    passed_ranks: set[int] = set()
    for pod in pods:
        end = pod.gate_end
        if end is None:
            continue
        # The container's exit code is the verdict; the message only explains it.
        report = SmokeReport.from_termination_message(end.message, exit_code=end.exit_code)
        node = pod.node or report.node or None
        if node:
            results[node] = smoke_entry(report, pod=pod, node=node)
        if end.exit_code == SmokeExit.PASS:
            passed_ranks.add(pod.rank)
            continue
        failures.append(
            GateFailure(
                pod=pod.name,
                node=node,
                exit_code=end.exit_code,
                failed_check=report.failed_check or f"exit {end.exit_code}",
                reason=report.reason or end.reason or "no reason given",
                remedy=report.remedy,
            )
        )
        if end.exit_code == SmokeExit.FAIL:
            at_fault.update(n for r in report.suspect_node_ranks if (n := node_of_rank.get(r)))
            if report.fault == Fault.OWN and node:
                at_fault.add(node)
    rank_of_node = {n: r for r, n in sorted(node_of_rank.items(), reverse=True)}
    exclude = sorted(at_fault, key=lambda n: (rank_of_node.get(n, len(pods)), n))
    return GateVerdict(
        started=any(p.gate_started for p in pods),
        all_passed=len(passed_ranks) >= num_nodes,
        failures=tuple(failures),
        exclude_nodes=tuple(exclude),
        results=results,
    )
