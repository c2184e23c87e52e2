"""The smoke gate's failure reasons: each id, its exit code and the one-line remedy users act on.

This table is the single source: the gate (runtime) puts the remedy into its report, the
operator shows it in events and status, and ``docs/smoke-gate.md`` carries the same table as the
troubleshooting guide (a drift test keeps the two equal). It is pure and import-light (no torch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from hyperframe.constants import SmokeExit

__all__ = ["FAILURES", "FailureReason", "remedy_for"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureReason:
    """One way the gate can fail."""

    id: str
    """Stable identifier, ``<area>.<what>``; it is the report's ``failed_check``."""
    exit_code: SmokeExit
    """The gate's exit code when this reason is the first failure."""
    summary: str
    """What was observed, in a few words (for tables and docs)."""
    remedy: str
    """One line telling the user what to check or change."""


def _table(*reasons: FailureReason) -> Mapping[str, FailureReason]:
    return MappingProxyType({r.id: r for r in reasons})


FAILURES: Final[Mapping[str, FailureReason]] = _table(
    FailureReason(
        id="config.missing-env",
        exit_code=SmokeExit.CONFIG,
        summary="a rendezvous variable is missing or malformed",
        remedy="Set MASTER_ADDR, MASTER_PORT, NODE_RANK, NPROC_PER_NODE and PET_NNODES (WORLD_SIZE counts ranks); the operator sets them, so never set them in spec.env.",
    ),
    FailureReason(
        id="config.invalid",
        exit_code=SmokeExit.CONFIG,
        summary="the resolved job config is missing or invalid",
        remedy="Check that the job's ConfigMap is mounted at /etc/hyperframe/job.json (or pass --config) and was rendered by the same HyperFrame version.",
    ),
    FailureReason(
        id="config.runtime-version",
        exit_code=SmokeExit.CONFIG,
        summary="the image holds another hyperframe-runtime than the operator expects",
        remedy="Build the job's image FROM the runtime's framework image (hyperframe image build DIR --from RUNTIME), or use the runtime of the operator's release; the message names both versions.",
    ),
    FailureReason(
        id="config.world-size",
        exit_code=SmokeExit.CONFIG,
        summary="the environment disagrees with the job config on the world size",
        remedy="PET_NNODES x NPROC_PER_NODE must equal WORLD_SIZE and job.json's nodes x procsPerNode; re-render the job instead of editing pod env by hand.",
    ),
    FailureReason(
        id="device.cuda-unavailable",
        exit_code=SmokeExit.FAIL,
        summary="CUDA is not available in the container",
        remedy="The GPU is not visible in the container: check the device plugin (GPU resource request) and the runtime class (nvidia).",
    ),
    FailureReason(
        id="device.count",
        exit_code=SmokeExit.FAIL,
        summary="the visible GPU count is not what the job asked for",
        remedy="Fewer GPUs: one is missing from the container, check the node's device plugin and nvidia-smi on the node. More GPUs: the container sees GPUs it did not request, check for privileged mode or a NVIDIA_VISIBLE_DEVICES/CUDA_VISIBLE_DEVICES override in the runtime's env. The node is excluded and the gang restarts.",
    ),
    FailureReason(
        id="device.driver",
        exit_code=SmokeExit.FAIL,
        summary="the driver is too old for torch's CUDA, or the device cannot initialise",
        remedy="Use a runtime whose CUDA version the node driver supports (see the pin matrix) or upgrade the node's NVIDIA driver.",
    ),
    FailureReason(
        id="device.matmul",
        exit_code=SmokeExit.FAIL,
        summary="a matmul gave a wrong result or too few TFLOP/s",
        remedy="The GPU computes wrongly or slowly: drain the node and run DCGM diagnostics (dcgmi diag -r 3); check clocks and thermal throttling; or lower the runtime's spec.smoke.minMatmulTFLOPS.",
    ),
    FailureReason(
        id="device.memory",
        exit_code=SmokeExit.FAIL,
        summary="allocating the configured fraction of device memory failed",
        remedy="Another process holds GPU memory: check nvidia-smi on the node for stray processes, or lower the runtime's spec.smoke.memoryFraction.",
    ),
    FailureReason(
        id="device.memory-corrupt",
        exit_code=SmokeExit.FAIL,
        summary="device memory did not read back what was written",
        remedy="GPU memory returns wrong data: check ECC error counts (nvidia-smi -q -d ECC) and the kernel log for Xid errors, drain the node and run DCGM diagnostics (dcgmi diag -r 3).",
    ),
    FailureReason(
        id="device.bandwidth",
        exit_code=SmokeExit.FAIL,
        summary="device memory bandwidth below the runtime's minimum",
        remedy="Device memory is slow: check for ECC errors and clock throttling (nvidia-smi -q), then drain the node; or lower the runtime's spec.smoke.minMemoryBandwidthGBps.",
    ),
    FailureReason(
        id="device.p2p",
        exit_code=SmokeExit.FAIL,
        summary="a copy to another local GPU and back came back wrong",
        remedy="GPU-to-GPU copies are corrupted: check the links (nvidia-smi nvlink -s, nvidia-smi topo -m) and the kernel log for Xid errors, then drain the node.",
    ),
    FailureReason(
        id="device.hang",
        exit_code=SmokeExit.TIMEOUT,
        summary="a device check did not finish in time",
        remedy="The GPU hangs: look for Xid errors in the node's kernel log (dmesg), drain the node and reset the GPU.",
    ),
    FailureReason(
        id="node.shm",
        exit_code=SmokeExit.FAIL,
        summary="/dev/shm is smaller than the pod's configured size, or under the floor for several ranks per node",
        remedy="Raise the runtime's shm size (spec.pod.shmSize in the HyperFrameRuntime; at least 256Mi with several ranks per node); if it is already set, the node does not mount it (check the kubelet's SizeMemoryBackedVolumes and the node's allocatable memory).",
    ),
    FailureReason(
        id="node.rdma",
        exit_code=SmokeExit.FAIL,
        summary="no InfiniBand/RDMA device visible though the runtime requests RDMA",
        remedy="No IB device in the container: check the runtime's spec.pod.rdma (resourceName, e.g. rdma/ib, and its device plugin) and the IPC_LOCK capability.",
    ),
    FailureReason(
        id="collective.rendezvous",
        exit_code=SmokeExit.TIMEOUT,
        summary="ranks did not arrive at the rendezvous in time",
        remedy="The named ranks never arrived: check their pods are scheduled and running, MASTER_ADDR resolves (headless Service) and MASTER_PORT is not blocked by a NetworkPolicy or firewall.",
    ),
    FailureReason(
        id="collective.init",
        exit_code=SmokeExit.FAIL,
        summary="the process group could not be created",
        remedy="NCCL/gloo could not connect: check NCCL_SOCKET_IFNAME (or GLOO_SOCKET_IFNAME) names an interface that exists in the pod, and the firewall between nodes.",
    ),
    FailureReason(
        id="collective.timeout",
        exit_code=SmokeExit.TIMEOUT,
        summary="an all-reduce did not finish in time",
        remedy="NCCL timeout: check NCCL_SOCKET_IFNAME and the firewall between nodes; run with NCCL_DEBUG=INFO to see which transport hangs.",
    ),
    FailureReason(
        id="collective.result",
        exit_code=SmokeExit.FAIL,
        summary="an all-reduce returned a wrong result",
        remedy="Data was corrupted in transit: run nccl-tests on the named nodes, check NIC/GPU errors and exclude the node.",
    ),
    FailureReason(
        id="collective.busbw",
        exit_code=SmokeExit.FAIL,
        summary="all-reduce bus bandwidth below the runtime's minimum",
        remedy="Bus bandwidth is low: check NCCL uses the RDMA devices (NCCL_DEBUG=INFO shows NET/IB), NCCL_IB_HCA, GPUDirect RDMA and the link speed.",
    ),
    FailureReason(
        id="internal.error",
        exit_code=SmokeExit.FAIL,
        summary="the gate itself failed unexpectedly",
        remedy="An unexpected error in the gate: see the init container log (kubectl logs POD -c smoke-gate) and report it with that log.",
    ),
    FailureReason(
        id="report.unreadable",
        exit_code=SmokeExit.FAIL,
        summary="the gate's termination message could not be parsed",
        remedy="The gate report was lost or cut off: read the init container log (kubectl logs POD -c smoke-gate) for the full result.",
    ),
)


def remedy_for(reason_id: str) -> str:
    """The remedy for a reason id; unknown ids (a newer gate) fall back to the log hint."""
    reason = FAILURES.get(reason_id)
    return reason.remedy if reason is not None else FAILURES["internal.error"].remedy
