"""Turns the ranks' records into this node's :class:`~hyperframe.smoke_report.SmokeReport` (pure).

Which failure the reason shows, in order: what the node agent itself saw (a hung or dead rank, an
unreachable store), a rank that never arrived, this node's own device or host failure, the first
device or host failure elsewhere in the job, this node's collective failures, and last the busbw
threshold.

Who is at fault is kept apart from what the reason shows: ``suspect_node_ranks`` names every node
whose device or host check failed (or whose ranks never arrived), and ``fault`` says whether that
includes this node (``own``), only other nodes (``other``), or nobody (``unattributed``: a job-wide
busbw shortfall or a collective error, which no figure pins on one node).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hyperframe.constants import SmokeExit
from hyperframe.smoke_remedies import FAILURES
from hyperframe.smoke_report import DeviceFigures, Fault, SmokeReport

from hyperframe_runtime.smoke.config import GateConfig
from hyperframe_runtime.smoke.outcome import AllReduceFigure, Failure, RankRecord

__all__ = ["build_report", "headline_figure"]


def headline_figure(records: Sequence[RankRecord]) -> AllReduceFigure | None:
    """The all-reduce figure at the largest size (bandwidth-bound), as seen by this node's ranks."""
    figures = [f for r in records for f in r.allreduce]
    if not figures:
        return None
    largest = max(f.size_bytes for f in figures)
    return min((f for f in figures if f.size_bytes == largest), key=lambda f: f.busbw_gbps)


def _is_device_or_node(failure: Failure) -> bool:
    return failure.reason_id.split(".")[0] in ("device", "node")


def _first_failure(
    config: GateConfig, own: Sequence[RankRecord], job: Sequence[RankRecord], agent_failure: Failure | None
) -> Failure | None:
    if agent_failure is not None:
        return agent_failure
    own_failures = [r.failure for r in sorted(own, key=lambda r: r.rank) if r.failure is not None]
    for failure in own_failures:
        if failure.reason_id == "collective.rendezvous":
            return failure
    # This node's own device or host failure first, then the first one elsewhere in the job.
    for failure in own_failures:
        if _is_device_or_node(failure):
            return failure
    for record in sorted(job, key=lambda r: r.rank):
        if record.failure is not None and _is_device_or_node(record.failure):
            return record.failure
    if own_failures:
        return own_failures[0]
    if "collective" in config.checks and config.min_busbw_gbps > 0 and config.world_size > 1:
        figure = headline_figure(own)
        if figure is not None and figure.busbw_gbps < config.min_busbw_gbps:
            # A ring all-reduce runs at the pace of its slowest link, so every rank times the same
            # figure: nothing here singles out a node, and the report blames none.
            return Failure(
                reason_id="collective.busbw",
                message=(
                    f"all-reduce busbw {figure.busbw_gbps:.3g} GB/s (algbw {figure.algbw_gbps:.3g} GB/s at "
                    f"{figure.size_bytes / (1 << 20):g} MiB over {config.world_size} ranks) < minimum "
                    f"{config.min_busbw_gbps:g} GB/s; the job-wide figure names no node"
                ),
                suspect_node_ranks=(),
            )
    return None


def _suspects(failure: Failure, job: Sequence[RankRecord]) -> tuple[int, ...]:
    """The nodes at fault: the failure's own suspects, plus every node a device or host check
    failed on anywhere in the job (two bad nodes are both named, whichever one the reason shows)."""
    suspects = set(failure.suspect_node_ranks)
    if _is_device_or_node(failure):
        for record in job:
            if record.failure is not None and _is_device_or_node(record.failure):
                suspects.update(record.failure.suspect_node_ranks)
    return tuple(sorted(suspects))


def _fault_of(node_rank: int, suspects: Sequence[int]) -> Fault:
    """Whose fault a failure is, for the node ``node_rank``, given the nodes the gate blames."""
    if node_rank in suspects:
        return Fault.OWN
    return Fault.OTHER if suspects else Fault.UNATTRIBUTED


def build_report(
    config: GateConfig,
    *,
    own: Sequence[RankRecord],
    job: Sequence[RankRecord],
    agent_failure: Failure | None,
    duration_s: float,
) -> SmokeReport:
    """This node's report; ``job`` holds every rank's published record that could be read."""
    by_rank = {r.rank: r for r in job}
    by_rank.update({r.rank: r for r in own})
    devices: list[DeviceFigures] = [by_rank[rank].device for rank in sorted(by_rank)]
    figure = headline_figure(own)
    failure = _first_failure(config, own, list(by_rank.values()), agent_failure)
    passed = SmokeReport(
        ok=True,
        exit_code=int(SmokeExit.PASS),
        node=config.node_name,
        node_rank=config.node_rank,
        busbw_gbps=figure.busbw_gbps if figure else None,
        algbw_gbps=figure.algbw_gbps if figure else None,
        world_size=config.world_size,
        duration_s=duration_s,
        devices=devices,
    )
    if failure is None:
        return passed
    entry = FAILURES[failure.reason_id]
    suspects = _suspects(failure, list(by_rank.values()))
    return replace(
        passed,
        ok=False,
        exit_code=int(entry.exit_code),
        failed_check=failure.reason_id,
        reason=failure.message,
        remedy=entry.remedy,
        missing_ranks=list(failure.missing_ranks),
        suspect_node_ranks=list(suspects),
        fault=_fault_of(config.node_rank, suspects),
    )
