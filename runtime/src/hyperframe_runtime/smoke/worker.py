"""One rank of the gate, run in its own process (spawned by the node agent, one per local device).

Order: device checks -> publish the record -> bounded rendezvous -> (if nobody failed) process
group, verified and timed all-reduces -> result to the agent. Every step is announced to the
agent first, so that the agent can bound it in time and name the step of a rank that hangs.
"""

from __future__ import annotations

import multiprocessing.queues
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Final, Protocol

import torch
import torch.distributed as dist

from hyperframe_runtime.process_group import leave_process_group
from hyperframe_runtime.smoke.collective import (
    PrefixStore,
    TCPStore,
    allreduce_figures,
    arrive,
    failures_reported,
    report_failure,
    wait_for_all,
)
from hyperframe_runtime.smoke.config import GateConfig
from hyperframe_runtime.smoke.outcome import Failure, RankRecord, rank_ranges
from hyperframe_runtime.smoke.probe import DeviceProbe

__all__ = ["STAGES", "StageSlots", "record_key", "run_rank"]

STAGES: Final = ("start", "devices", "rendezvous", "group-init", "allreduce", "teardown")
"""The steps a rank announces, in order; the agent holds a time budget for each."""

Messages = multiprocessing.queues.Queue  # of (local_rank, record json)


class StageSlots(Protocol):
    """Shared memory, one slot per local rank, holding the index in :data:`STAGES` of the step
    the rank is in. Writes are synchronous, so a rank that dies right after announcing a step is
    still named with that step (a queue message could be lost with the process)."""

    def __getitem__(self, index: int, /) -> int: ...

    def __setitem__(self, index: int, value: int, /) -> None: ...


def record_key(rank: int) -> str:
    """Store key of a rank's published record."""
    return f"dev/{rank}"


def run_rank(
    local_rank: int,
    config: GateConfig,
    probe: DeviceProbe,
    messages: Messages,  # type: ignore[type-arg]
    stages: StageSlots,
) -> None:
    """Process entry of one rank: never raises; the result (or failure) goes to ``messages``."""
    rank = config.global_rank(local_rank)

    def stage(name: str) -> None:
        stages[local_rank] = STAGES.index(name)

    stage("devices")
    outcome = probe.check(local_rank, config)
    record = RankRecord(
        rank=rank,
        node_rank=config.node_rank,
        node=config.node_name,
        device=outcome.figures,
        failure=outcome.failure,
        notes=outcome.notes,
    )
    try:
        record = _join_job(config, rank, local_rank, record, stage)
    except Exception as exc:  # the agent must always hear back
        record = replace(
            record,
            failure=record.failure or Failure(reason_id="internal.error", message=f"rank {rank}: {exc!r}"),
        )
    messages.put((local_rank, record.to_json()))


def _join_job(
    config: GateConfig, rank: int, local_rank: int, record: RankRecord, stage: Callable[[str], None]
) -> RankRecord:
    stage("rendezvous")
    store = TCPStore(
        config.store_host(),
        config.master_port,
        is_master=False,
        timeout=timedelta(seconds=config.rendezvous_timeout_s),
        wait_for_workers=False,
    )
    store.set(record_key(rank), record.to_json())
    if record.failure is not None:
        report_failure(store)
    arrive(store, rank, config.world_size)
    missing = wait_for_all(store, config.world_size, config.rendezvous_timeout_s)
    if missing:
        nodes = sorted({config.node_of(r) for r in missing})
        return replace(
            record,
            failure=record.failure
            or Failure(
                reason_id="collective.rendezvous",
                message=(
                    f"rank(s) {rank_ranges(missing)} on node(s) {rank_ranges(nodes)} did not arrive within "
                    f"{config.rendezvous_timeout_s:g}s"
                ),
                missing_ranks=tuple(missing),
                suspect_node_ranks=tuple(nodes),
            ),
        )
    if record.failure is not None or failures_reported(store) or "collective" not in config.checks:
        return record  # a device or node failed somewhere: the agent reports it from the store
    device = torch.device("cuda", local_rank) if config.device == "cuda" else torch.device("cpu")
    stage("group-init")
    started = time.perf_counter()
    try:
        dist.init_process_group(
            config.resolved_backend(),
            store=PrefixStore("pg", store),
            rank=rank,
            world_size=config.world_size,
            timeout=timedelta(seconds=config.step_timeout_s),
            device_id=device if device.type == "cuda" else None,
        )
        # The first collective builds the communicators (NCCL connects lazily): part of init.
        dist.all_reduce(torch.ones(1, device=device))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except Exception as exc:
        return replace(record, failure=_collective_failure(rank, "process group init", exc))
    init_s = time.perf_counter() - started
    stage("allreduce")
    try:
        figures, failure = allreduce_figures(config, rank, device)
    except Exception as exc:
        figures, failure = [], _collective_failure(rank, "all-reduce", exc)
    stage("teardown")
    # A rank that failed may have left its peers inside a collective: it leaves alone.
    leave_process_group(together=failure is None)
    return replace(record, failure=failure, allreduce=tuple(figures), group_init_s=init_s)


def _collective_failure(rank: int, what: str, exc: Exception) -> Failure:
    text = str(exc)
    timed_out = "timeout" in text.lower() or "timed out" in text.lower()
    first = text.splitlines()[0] if text else repr(exc)
    return Failure(
        reason_id="collective.timeout" if timed_out else "collective.init",
        message=f"rank {rank}: {what} failed: {first}",
    )
