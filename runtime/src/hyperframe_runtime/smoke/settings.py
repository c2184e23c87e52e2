"""Maps the resolved job config (job.json) and the pod env onto the gate's :class:`GateConfig`.

The runtime's smoke policy has one time limit for the whole gate (``smoke.timeoutSeconds``),
which the node agent enforces as a hard limit. Inside it, each step gets a budget of limit / 10
(2 to 60 s) and the rendezvous may use what the two slowest steps leave (capped by the job's
rendezvous timeout), so that a missing rank is named before the limit cuts the gate off.
"""

from __future__ import annotations

from hyperframe.api.resolved import ResolvedJobConfig

from hyperframe_runtime.jobenv import JobEnv, JobEnvError
from hyperframe_runtime.smoke.config import Check, GateConfig

__all__ = ["SHM_FLOOR_BYTES", "gate_config", "split_timeout"]

# NCCL's intra-node transport lives in /dev/shm; the container default (64 MiB) is the classic
# failure. Every job checks the size job.json says the pod mounts; GPU jobs with several ranks per
# node also check this floor, which 64 MiB never clears.
SHM_FLOOR_BYTES = 256 << 20


def split_timeout(total_s: float, rendezvous_cap_s: float) -> tuple[float, float]:
    """(rendezvous timeout, step timeout) inside the gate's hard limit ``total_s``."""
    step = min(max(total_s / 10.0, 2.0), 60.0)
    rendezvous = min(max(total_s - 2 * step, step), rendezvous_cap_s)
    return rendezvous, step


def gate_config(job: ResolvedJobConfig, env: JobEnv, *, node_name: str) -> GateConfig:
    """The gate run for this pod; raises :class:`JobEnvError` when env and job disagree."""
    env.check_against(job)
    smoke = job.smoke
    cuda = job.gpus_per_node > 0
    if cuda and job.procs_per_node != job.gpus_per_node:
        raise JobEnvError(
            "config.world-size",
            f"procsPerNode: {job.procs_per_node}, but a GPU job runs one rank per GPU (gpusPerNode={job.gpus_per_node})",
        )
    rendezvous_s, step_s = split_timeout(float(smoke.timeout_seconds), float(job.rendezvous.timeout_seconds))
    checks: set[Check] = {"collective"}
    device_checks = set(smoke.device_checks)
    if device_checks:
        checks.add("devices")
    return GateConfig(
        master_addr=env.master_addr,
        master_port=env.master_port,
        nnodes=env.nnodes,
        node_rank=env.node_rank,
        nproc_per_node=env.nproc_per_node,
        node_name=node_name,
        device="cuda" if cuda else "cpu",
        backend=job.backend,
        memory_fraction=smoke.memory_fraction if "memory" in device_checks else 0.0,
        min_tflops=smoke.min_matmul_tflops,
        min_mem_bw_gbps=smoke.min_memory_bandwidth_gbps,
        device_checks=frozenset(device_checks),
        shm_bytes=smoke.shm_size_bytes,
        min_shm_bytes=SHM_FLOOR_BYTES if cuda and job.procs_per_node > 1 else 0,
        require_rdma=smoke.rdma_enabled,
        rdma_resource_name=smoke.rdma_resource_name or "",
        allreduce_sizes=tuple(smoke.nccl_message_sizes),
        min_busbw_gbps=smoke.min_bus_bandwidth_gbps,
        rendezvous_timeout_s=rendezvous_s,
        step_timeout_s=step_s,
        total_timeout_s=float(smoke.timeout_seconds),
        checks=frozenset(checks),
    )
