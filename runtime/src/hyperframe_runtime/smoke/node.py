"""The node agent: the gate's process on each node (the init container's main process).

It hosts the rendezvous store on node rank 0, runs the host checks, spawns one rank process per
local device and holds every step of every rank to a time budget: a rank that hangs is killed and
named with the step it hung in, so the gate always ends. It then reads every rank's published
record from the store and builds this node's report. Node 0 lingers until the other nodes have
read what they need (bounded), because its exit takes the store down.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.process
import multiprocessing.queues
import queue
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from hyperframe.smoke_report import DeviceFigures, SmokeReport

from hyperframe_runtime.smoke.collective import Store, TCPStore, arrive, missing_ranks, report_failure
from hyperframe_runtime.smoke.config import GateConfig
from hyperframe_runtime.smoke.host_checks import check_host
from hyperframe_runtime.smoke.outcome import Failure, RankRecord, rank_ranges
from hyperframe_runtime.smoke.probe import DeviceProbe
from hyperframe_runtime.smoke.summary import build_report
from hyperframe_runtime.smoke.worker import STAGES, StageSlots, record_key, run_rank

__all__ = ["NodeResult", "run_node"]

_NODES_DONE: Final = "nodes-done"
_POLL_S: Final = 0.05
_DEAD_GRACE_S: Final = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeResult:
    report: SmokeReport
    own: tuple[RankRecord, ...]
    """This node's rank records (device figures, notes, all-reduce figures)."""


def run_node(config: GateConfig, probe: DeviceProbe) -> NodeResult:
    """Run this node's part of the gate; never hangs past ``config.deadline_s()`` (plus linger)."""
    started = time.monotonic()
    host_failure = check_host(config)
    # Ranks are forked before the store exists: the agent has no threads yet, and the ranks'
    # store clients simply retry until node 0's server is up.
    ranks = None if host_failure is not None else _start_ranks(config, probe)
    try:
        store = TCPStore(
            config.store_host(),
            config.master_port,
            is_master=config.node_rank == 0,
            timeout=timedelta(seconds=config.rendezvous_timeout_s),
            wait_for_workers=False,
        )
    except (RuntimeError, OSError) as exc:
        if ranks is not None:
            _stop(ranks)
        node0 = list(range(config.nproc_per_node))
        failure = Failure(
            reason_id="collective.rendezvous",
            message=(
                f"node 0 (ranks {rank_ranges(node0)}) not reachable at {config.master_addr}:{config.master_port} "
                f"within {config.rendezvous_timeout_s:g}s: {str(exc).splitlines()[0] if str(exc) else exc!r}"
            ),
            missing_ranks=tuple(node0),
            suspect_node_ranks=(0,),
        )
        report = build_report(
            config, own=[], job=[], agent_failure=failure, duration_s=time.monotonic() - started
        )
        return NodeResult(report=report, own=())

    agent_failure: Failure | None = None
    if ranks is None:
        assert host_failure is not None
        own = _publish_host_failure(store, config, host_failure)
    else:
        own, agent_failure = _supervise(config, ranks, store, started)
    job = _read_records(store, config)
    report = build_report(
        config, own=own, job=job, agent_failure=agent_failure, duration_s=time.monotonic() - started
    )
    _finish(store, config)
    return NodeResult(report=report, own=tuple(own))


@dataclass(slots=True)
class _Ranks:
    procs: dict[int, multiprocessing.process.BaseProcess]
    messages: multiprocessing.queues.Queue  # type: ignore[type-arg]
    stages: StageSlots


def _start_ranks(config: GateConfig, probe: DeviceProbe) -> _Ranks:
    context = multiprocessing.get_context("fork")
    messages = context.Queue()
    stages: StageSlots = context.Array("b", config.nproc_per_node, lock=False)
    procs: dict[int, multiprocessing.process.BaseProcess] = {
        lr: context.Process(
            target=run_rank,
            args=(lr, config, probe, messages, stages),
            name=f"hyperframe-smoke-rank-{config.global_rank(lr)}",
        )
        for lr in range(config.nproc_per_node)
    }
    for proc in procs.values():
        proc.start()
    return _Ranks(procs=procs, messages=messages, stages=stages)


def _stop(ranks: _Ranks) -> None:
    for proc in ranks.procs.values():
        if proc.is_alive():
            proc.terminate()
    for proc in ranks.procs.values():
        proc.join(timeout=2.0)
        if proc.is_alive():
            proc.kill()
            proc.join()
    ranks.messages.close()
    ranks.messages.cancel_join_thread()


def _publish_host_failure(store: Store, config: GateConfig, failure: Failure) -> list[RankRecord]:
    """A node that fails its host checks still 'arrives', so that the others stop early."""
    records = []
    for local_rank in range(config.nproc_per_node):
        rank = config.global_rank(local_rank)
        record = RankRecord(
            rank=rank,
            node_rank=config.node_rank,
            node=config.node_name,
            device=DeviceFigures(index=local_rank, name="not checked", ok=False, node_rank=config.node_rank),
            failure=failure,
        )
        store.set(record_key(rank), record.to_json())
        report_failure(store)
        arrive(store, rank, config.world_size)
        records.append(record)
    return records


def _budget_s(config: GateConfig, stage: str) -> float:
    if stage == "rendezvous":
        return config.rendezvous_timeout_s + config.step_timeout_s
    if stage == "allreduce":
        return config.step_timeout_s * len(config.allreduce_sizes)
    return config.step_timeout_s


def _stuck(
    config: GateConfig, local_rank: int, stage: str, *, died: int | None = None, over_limit: bool = False
) -> Failure:
    rank = config.global_rank(local_rank)
    where = f"rank {rank} (node {config.node_rank} {config.node_name}, local {local_rank})"
    if died is not None:
        what = f"exited with code {died} during {stage}"
    elif over_limit:
        what = f"was still in {stage} at the gate's time limit ({config.total_timeout_s:g}s)"
    else:
        what = f"did not finish {stage} within {_budget_s(config, stage):g}s"
    suspects = (config.node_rank,)
    if stage == "devices":
        return Failure(
            reason_id="device.hang" if died is None else "device.driver",
            message=f"{where} {what}",
            suspect_node_ranks=suspects,
        )
    if stage in ("group-init", "allreduce", "teardown"):
        return Failure(reason_id="collective.timeout", message=f"{where} {what}")
    if stage == "rendezvous":
        return Failure(reason_id="collective.rendezvous", message=f"{where} {what}")
    return Failure(reason_id="internal.error", message=f"{where} {what}", suspect_node_ranks=suspects)


def _supervise(
    config: GateConfig, ranks: _Ranks, store: Store, started: float
) -> tuple[list[RankRecord], Failure | None]:
    procs, messages = ranks.procs, ranks.messages
    limit = started + config.total_timeout_s if config.total_timeout_s > 0 else float("inf")
    stages = {lr: ("start", time.monotonic()) for lr in procs}
    dead_since: dict[int, float] = {}
    results: dict[int, RankRecord] = {}
    failure: Failure | None = None
    try:
        while len(results) < len(procs) and failure is None:
            try:
                local_rank, payload = messages.get(timeout=_POLL_S)
                results[local_rank] = RankRecord.from_json(payload)
            except queue.Empty:
                pass
            now = time.monotonic()
            for local_rank, (stage, _) in list(stages.items()):
                current = STAGES[ranks.stages[local_rank]]
                if current != stage:
                    stages[local_rank] = (current, now)
            for local_rank, (stage, since) in stages.items():
                if local_rank in results:
                    continue
                exitcode = procs[local_rank].exitcode
                if exitcode is not None:
                    # A rank's last message can still be in the pipe just after it exits.
                    if now - dead_since.setdefault(local_rank, now) > _DEAD_GRACE_S:
                        failure = _stuck(config, local_rank, stage, died=exitcode)
                        break
                elif now - since > _budget_s(config, stage):
                    failure = _stuck(config, local_rank, stage)
                    break
                elif now > limit:
                    failure = _stuck(config, local_rank, stage, over_limit=True)
                    break
    finally:
        _stop(ranks)
    if failure is not None and failure.reason_id == "collective.rendezvous":
        missing = missing_ranks(store, config.world_size)
        if missing:
            failure = Failure(
                reason_id=failure.reason_id,
                message=f"{failure.message}; rank(s) {rank_ranges(missing)} never arrived",
                missing_ranks=tuple(missing),
                suspect_node_ranks=tuple(sorted({config.node_of(r) for r in missing})),
            )
    return [results[lr] for lr in sorted(results)], failure


def _read_records(store: Store, config: GateConfig) -> list[RankRecord]:
    """Every rank's published record that exists (all of them unless someone never arrived)."""
    records = []
    try:
        for rank in range(config.world_size):
            key = record_key(rank)
            if store.check([key]):
                records.append(RankRecord.from_json(store.get(key)))
    except (RuntimeError, OSError):
        pass  # node 0 gone: report what this node knows
    return records


def _finish(store: Store, config: GateConfig) -> None:
    """Say this node is done; node 0 keeps the store up until every present node said so."""
    try:
        done = int(store.add(_NODES_DONE, 1))
        if config.node_rank != 0:
            return
        absent = set(missing_ranks(store, config.world_size))
        present = {config.node_of(r) for r in range(config.world_size) if r not in absent}
        deadline = time.monotonic() + config.step_timeout_s
        while done < max(len(present), 1) and time.monotonic() < deadline:
            time.sleep(_POLL_S)
            done = int(store.add(_NODES_DONE, 0))
    except (RuntimeError, OSError):
        pass
