"""What one node's smoke gate checks, and where the job's other ranks are.

:class:`GateConfig` is the gate's only input: typed and validated on construction. It is built
from the environment the operator renders (MASTER_ADDR, MASTER_PORT, PET_NNODES, NODE_RANK,
NPROC_PER_NODE, WORLD_SIZE) together with the resolved job config; see
:mod:`hyperframe_runtime.smoke.settings` for that mapping. Config problems raise
``GateConfigError`` (:class:`~hyperframe_runtime.jobenv.JobEnvError`), which the CLI turns into exit 2 (``config.*`` reasons).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hyperframe.api.runtime import DEVICE_CHECKS

from hyperframe_runtime.jobenv import JobEnvError as GateConfigError

__all__ = ["GateConfig", "GateConfigError"]

Device = Literal["cpu", "cuda"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GateConfig:
    """One node's gate run. Sizes in bytes, bandwidths in GB/s (1e9 bytes/s), times in seconds."""

    # ---- where: the job-wide rendezvous ---------------------------------------------------------
    master_addr: str
    """Host of node rank 0, which serves the gate's rendezvous store (the job's headless Service).
    Node 0 itself (its agent and its rank processes) reaches the store over loopback instead: see
    :meth:`store_host`."""
    master_port: int
    """Port of that store; the launcher reuses it after the gate has exited."""
    nnodes: int
    """Nodes (pods) in the job: the env's PET_NNODES."""
    node_rank: int
    """This node's rank, 0 .. nnodes-1."""
    nproc_per_node: int
    """Ranks per node: one per GPU on CUDA jobs, the job's processes per node on CPU jobs."""
    node_name: str = ""
    """Kubernetes node name (env NODE_NAME) or hostname, for reports."""

    # ---- what: devices --------------------------------------------------------------------------
    device: Device = "cpu"
    """``cuda`` runs the device checks and NCCL; ``cpu`` skips device checks and uses gloo."""
    backend: str = ""
    """torch.distributed backend; "" = nccl on cuda, gloo on cpu."""
    matmul_size: int = 8192
    """Square bf16 matmul size for the TFLOP/s figure."""
    memory_fraction: float = 0.9
    """Fraction of total device memory the allocation check must obtain; 0 skips it."""
    min_tflops: float = 0.0
    """Fail a device below this bf16 matmul TFLOP/s (the runtime's ``smoke.minMatmulTFLOPS``);
    0 = report only."""
    min_mem_bw_gbps: float = 0.0
    """Fail a device below this copy bandwidth in GB/s (the runtime's
    ``smoke.minMemoryBandwidthGBps``); 0 = report only."""
    shm_bytes: int = 0
    """The /dev/shm size the pod is configured with (job.json ``smoke.shmSizeBytes``); the node
    fails when the mounted /dev/shm is smaller; 0 = not known."""
    min_shm_bytes: int = 0
    """Floor for /dev/shm (what NCCL needs with several ranks per node); 0 = none."""
    require_rdma: bool = False
    """Fail the node when no InfiniBand/RDMA device is visible (the runtime enables RDMA)."""
    rdma_resource_name: str = ""
    """The RDMA extended resource the pod requests, for reports."""
    device_checks: frozenset[str] = frozenset({"visible", "memory", "matmul"})
    """Which CUDA checks run: ``visible`` (the visible GPU count equals ``nproc_per_node``),
    ``memory`` (allocation, pattern read-back and copy bandwidth), ``matmul`` (correctness and
    TFLOP/s), ``p2p`` (a verified copy to the next local GPU and back); see
    :mod:`hyperframe_runtime.smoke.device_checks`."""

    # ---- what: the collective -------------------------------------------------------------------
    allreduce_sizes: tuple[int, ...] = (1 << 20, 64 << 20)
    """All-reduce message sizes; the busbw figure is taken at the largest."""
    iterations: int = 5
    """Timed all-reduces per size (after one verified warm-up)."""
    min_busbw_gbps: float = 0.0
    """Fail when busbw at the largest size is below this; 0 = report only."""

    # ---- bounds ---------------------------------------------------------------------------------
    rendezvous_timeout_s: float = 300.0
    """How long ranks wait for each other (pods start at different times: image pulls)."""
    step_timeout_s: float = 60.0
    """Budget for every other step: process start, device checks, group init, each collective."""
    total_timeout_s: float = 0.0
    """Hard limit on the whole gate (the runtime's ``smoke.timeoutSeconds``); 0 = the sum of the
    step budgets."""
    checks: frozenset[str] = field(default_factory=lambda: frozenset({"devices", "collective"}))
    """Which check groups run: ``devices`` and/or ``collective``."""

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> GateConfigError:
            return GateConfigError("config.invalid", f"{name}: {why}")

        if not self.master_addr:
            raise GateConfigError("config.missing-env", "MASTER_ADDR: empty; set it to node rank 0's address")
        if not 0 < self.master_port < 65536:
            raise GateConfigError(
                "config.missing-env", f"MASTER_PORT: {self.master_port} is not a TCP port (1-65535)"
            )
        if self.nnodes < 1:
            raise GateConfigError("config.world-size", f"PET_NNODES: {self.nnodes} nodes; it must be >= 1")
        if not 0 <= self.node_rank < self.nnodes:
            raise GateConfigError(
                "config.world-size",
                f"NODE_RANK: {self.node_rank} is outside 0..{self.nnodes - 1} (PET_NNODES={self.nnodes} nodes)",
            )
        if self.nproc_per_node < 1:
            raise GateConfigError(
                "config.world-size", f"NPROC_PER_NODE: {self.nproc_per_node}; it must be >= 1"
            )
        if self.device not in ("cpu", "cuda"):
            raise bad("device", f"{self.device!r} must be 'cpu' or 'cuda'")
        if self.resolved_backend() not in ("gloo", "nccl") or (
            self.device == "cpu" and self.resolved_backend() == "nccl"
        ):
            raise bad("backend", f"{self.backend!r} must be 'gloo' or 'nccl' (nccl needs cuda)")
        if not 0.0 <= self.memory_fraction < 1.0:
            raise bad("memoryFraction", f"{self.memory_fraction} must be in [0, 1)")
        if not self.allreduce_sizes or min(self.allreduce_sizes) < 4:
            raise bad(
                "allreduceSizes", f"{list(self.allreduce_sizes)} must be a non-empty list of sizes >= 4 bytes"
            )
        if self.iterations < 1 or self.matmul_size < 1:
            raise bad("iterations", "iterations and matmulSize must be >= 1")
        if self.shm_bytes < 0 or self.min_shm_bytes < 0:
            raise bad("shmSizeBytes", "/dev/shm sizes must be >= 0 bytes")
        if self.rendezvous_timeout_s <= 0 or self.step_timeout_s <= 0 or self.total_timeout_s < 0:
            raise bad("timeouts", "rendezvous and step timeouts must be > 0 seconds")
        unknown_device = self.device_checks - set(DEVICE_CHECKS)
        if unknown_device:
            raise bad(
                "deviceChecks",
                f"unknown check(s) {sorted(unknown_device)}; known: {', '.join(DEVICE_CHECKS)}",
            )
        if self.min_tflops < 0 or self.min_mem_bw_gbps < 0 or self.min_busbw_gbps < 0:
            raise bad(
                "minimums", "minMatmulTFLOPS, minMemoryBandwidthGBps and minBusBandwidthGBps must be >= 0"
            )
        unknown = self.checks - {"devices", "collective"}
        if unknown:
            raise bad("checks", f"unknown check(s) {sorted(unknown)}; known: devices, collective")

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
