"""What one node's smoke gate checks, and where the job's other ranks are.

:class:`GateConfig` is the gate's only input: typed and validated on construction. It is built
from the environment the operator renders (MASTER_ADDR, MASTER_PORT, PET_NNODES, NODE_RANK,
NPROC_PER_NODE, WORLD_SIZE) together with the resolved job config; see
:mod:`hyperframe_runtime.smoke.settings` for that mapping. Config problems raise
``GateConfigError`` (:class:`~hyperframe_runtime.jobenv.JobEnvError`), which the CLI turns into exit 2 (``config.*`` reasons).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from hyperframe.api.codec import check
from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.fields import value_rules
from hyperframe.api.runtime import DeviceCheck

from hyperframe_runtime.jobenv import JobEnvError as GateConfigError
from hyperframe_runtime.jobenv import node_rank_errors

__all__ = ["Check", "GateConfig", "GateConfigError"]

Check = Literal["devices", "collective"]

# The config.* reason of an error by its path: the env the operator renders, else config.invalid.
_REASONS: Final[dict[str, str]] = {
    "MASTER_ADDR": "config.missing-env",
    "MASTER_PORT": "config.missing-env",
    "PET_NNODES": "config.world-size",
    "NODE_RANK": "config.world-size",
    "NPROC_PER_NODE": "config.world-size",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class GateConfig:
    """One node's gate run. Sizes in bytes, bandwidths in GB/s (1e9 bytes/s), times in seconds.

    Each field's rules are declared with it and checked by the job API's codec on construction
    (:func:`hyperframe.api.codec.check`); an error names the field by where its value comes from
    (the env variable, or the runtime's ``smoke`` field) as ``path: problem: fix``."""

    # ---- where: the job-wide rendezvous ---------------------------------------------------------
    master_addr: str = field(metadata=value_rules(json="MASTER_ADDR", min_length=1))
    """Host of node rank 0, which serves the gate's rendezvous store (the job's headless Service).
    Node 0 itself (its agent and its rank processes) reaches the store over loopback instead: see
    :meth:`store_host`."""
    master_port: int = field(metadata=value_rules(json="MASTER_PORT", minimum=1, maximum=65535))
    """Port of that store; the launcher reuses it after the gate has exited."""
    nnodes: int = field(metadata=value_rules(json="PET_NNODES", minimum=1))
    """Nodes (pods) in the job: the env's PET_NNODES."""
    node_rank: int = field(metadata=value_rules(json="NODE_RANK", minimum=0))
    """This node's rank, 0 .. nnodes-1."""
    nproc_per_node: int = field(metadata=value_rules(json="NPROC_PER_NODE", minimum=1))
    """Ranks per node: one per GPU on CUDA jobs, the job's processes per node on CPU jobs."""
    node_name: str = ""
    """Kubernetes node name (env NODE_NAME) or hostname, for reports."""

    # ---- what: devices --------------------------------------------------------------------------
    device: Literal["cpu", "cuda"] = "cpu"
    """``cuda`` runs the device checks and NCCL; ``cpu`` skips device checks and uses gloo."""
    backend: Literal["", "gloo", "nccl"] = ""
    """torch.distributed backend; "" = nccl on cuda, gloo on cpu."""
    matmul_size: int = field(default=8192, metadata=value_rules(json="matmulSize", minimum=1))
    """Square bf16 matmul size for the TFLOP/s figure."""
    memory_fraction: float = field(
        default=0.9, metadata=value_rules(json="memoryFraction", minimum=0, maximum=1, exclusive_maximum=True)
    )
    """Fraction of total device memory the allocation check must obtain; 0 skips it."""
    min_tflops: float = field(default=0.0, metadata=value_rules(json="minMatmulTFLOPS", minimum=0))
    """Fail a device below this bf16 matmul TFLOP/s (the runtime's ``smoke.minMatmulTFLOPS``);
    0 = report only."""
    min_mem_bw_gbps: float = field(
        default=0.0, metadata=value_rules(json="minMemoryBandwidthGBps", minimum=0)
    )
    """Fail a device below this copy bandwidth in GB/s (the runtime's
    ``smoke.minMemoryBandwidthGBps``); 0 = report only."""
    shm_bytes: int = field(default=0, metadata=value_rules(json="shmSizeBytes", minimum=0))
    """The /dev/shm size the pod is configured with (job.json ``smoke.shmSizeBytes``); the node
    fails when the mounted /dev/shm is smaller; 0 = not known."""
    min_shm_bytes: int = field(default=0, metadata=value_rules(json="minShmBytes", minimum=0))
    """Floor for /dev/shm (what NCCL needs with several ranks per node); 0 = none."""
    require_rdma: bool = False
    """Fail the node when no InfiniBand/RDMA device is visible (the runtime enables RDMA)."""
    rdma_resource_name: str = ""
    """The RDMA extended resource the pod requests, for reports."""
    device_checks: frozenset[DeviceCheck] = field(
        default=frozenset({"visible", "memory", "matmul"}), metadata=value_rules(json="deviceChecks")
    )
    """Which CUDA checks run: ``visible`` (the visible GPU count equals ``nproc_per_node``),
    ``memory`` (allocation, pattern read-back and copy bandwidth), ``matmul`` (correctness and
    TFLOP/s), ``p2p`` (a verified copy to the next local GPU and back); see
    :mod:`hyperframe_runtime.smoke.device_checks`."""

    # ---- what: the collective -------------------------------------------------------------------
    allreduce_sizes: tuple[int, ...] = field(
        default=(1 << 20, 64 << 20), metadata=value_rules(json="allreduceSizes", min_items=1, minimum=4)
    )
    """All-reduce message sizes; the busbw figure is taken at the largest."""
    iterations: int = field(default=5, metadata=value_rules(minimum=1))
    """Timed all-reduces per size (after one verified warm-up)."""
    min_busbw_gbps: float = field(default=0.0, metadata=value_rules(json="minBusBandwidthGBps", minimum=0))
    """Fail when busbw at the largest size is below this; 0 = report only."""

    # ---- bounds ---------------------------------------------------------------------------------
    rendezvous_timeout_s: float = field(
        default=300.0, metadata=value_rules(json="rendezvousTimeoutS", minimum=0, exclusive_minimum=True)
    )
    """How long ranks wait for each other (pods start at different times: image pulls)."""
    step_timeout_s: float = field(
        default=60.0, metadata=value_rules(json="stepTimeoutS", minimum=0, exclusive_minimum=True)
    )
    """Budget for every other step: process start, device checks, group init, each collective."""
    total_timeout_s: float = field(default=0.0, metadata=value_rules(json="totalTimeoutS", minimum=0))
    """Hard limit on the whole gate (the runtime's ``smoke.timeoutSeconds``); 0 = the sum of the
    step budgets."""
    checks: frozenset[Check] = frozenset({"devices", "collective"})
    """Which check groups run: ``devices`` and/or ``collective``."""

    def __post_init__(self) -> None:
        errors = check(self)
        if not errors:
            errors.extend(node_rank_errors(self.node_rank, self.nnodes))
        if self.device == "cpu" and self.backend == "nccl":
            errors.append(
                FieldError("backend", "'nccl' needs device 'cuda'", "use 'gloo' (or '') with device 'cpu'")
            )
        if errors:
            raise GateConfigError(_REASONS.get(errors[0].path, "config.invalid"), str(SpecError(errors)))

    @property
    def world_size(self) -> int:
        """Ranks in the job."""
        return self.nnodes * self.nproc_per_node

    def store_host(self) -> str:
        """Where this node reaches the rendezvous store. Node 0 serves it and reaches it over
        loopback, agent and rank processes alike: its own Service DNS name may not resolve before
        the pod is ready, and the server listens on every interface anyway."""
        return "127.0.0.1" if self.node_rank == 0 else self.master_addr

    def global_rank(self, local_rank: int) -> int:
        """The job-wide rank of this node's ``local_rank``."""
        return self.node_rank * self.nproc_per_node + local_rank

    def node_of(self, rank: int) -> int:
        """The node rank a global rank lives on."""
        return rank // self.nproc_per_node

    def resolved_backend(self) -> str:
        """``backend`` or the device's default."""
        return self.backend or ("nccl" if self.device == "cuda" else "gloo")

    def deadline_s(self) -> float:
        """Hard bound on the whole gate: after this the node agent kills its ranks (exit 3)."""
        steps = 4 + len(self.allreduce_sizes)  # start, devices, group init, sizes, teardown
        budgets = self.rendezvous_timeout_s + steps * self.step_timeout_s
        return min(budgets, self.total_timeout_s) if self.total_timeout_s > 0 else budgets
