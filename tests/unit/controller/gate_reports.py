"""Termination messages built by the gate's own report code (``build_report``), for operator tests.

The ranks' records are what the gate's ranks publish; ``build_report`` turns them into each node's
report exactly as the gate's node agent does, so the operator is fed the real format and the real
attribution, never a hand-written verdict.
"""

from __future__ import annotations

from hyperframe.smoke_report import DeviceFigures
from hyperframe_runtime.smoke.config import GateConfig
from hyperframe_runtime.smoke.outcome import AllReduceFigure, Failure, RankRecord
from hyperframe_runtime.smoke.summary import build_report


def _record(node_rank: int, *, bad: bool, busbw: float | None) -> RankRecord:
    failure = (
        Failure(
            reason_id="device.count",
            message=f"node {node_rank} GPU 0: not visible, 0 of 1 requested GPUs visible",
            suspect_node_ranks=(node_rank,),
        )
        if bad
        else None
    )
    figures = (
        ()
        if busbw is None
        else (AllReduceFigure(size_bytes=64 << 20, seconds=0.01, algbw_gbps=busbw, busbw_gbps=busbw),)
    )
    return RankRecord(
        rank=node_rank,
        node_rank=node_rank,
        node=f"node-{node_rank}",
        device=DeviceFigures(index=0, name="NVIDIA H100", ok=not bad, node_rank=node_rank),
        failure=failure,
        allreduce=figures,
    )


def gate_message(
    node_rank: int,
    node: str,
    *,
    nnodes: int = 2,
    bad_node_ranks: tuple[int, ...] = (),
    busbw: float = 180.0,
    min_busbw: float = 0.0,
) -> str:
    """Node ``node_rank``'s termination message when the device check fails on ``bad_node_ranks``
    (the other ranks then skip the collective) or, with none bad, all-reduce measures ``busbw``."""
    config = GateConfig(
        master_addr="127.0.0.1",
        master_port=29500,
        nnodes=nnodes,
        node_rank=node_rank,
        nproc_per_node=1,
        node_name=node,
        min_busbw_gbps=min_busbw,
    )
    # A device failure anywhere stops every rank before the collective: no all-reduce figures.
    measured = None if bad_node_ranks else busbw
    records = [_record(r, bad=r in bad_node_ranks, busbw=measured) for r in range(nnodes)]
    own = [records[node_rank]]
    report = build_report(config, own=own, job=records, agent_failure=None, duration_s=1.0)
    return report.to_termination_message()
