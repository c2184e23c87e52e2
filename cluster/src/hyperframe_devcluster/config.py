"""The layout and settings of one local cluster, and the state it records on disk.

Everything a cluster owns lives under one state directory:

    <state>/pki/          certificates and keys (kept across restarts)
    <state>/etcd/         etcd data
    <state>/logs/<c>.log  one log per component
    <state>/run/<c>.pid   one pid file per running component
    <state>/kubeconfig    admin kubeconfig (system:masters); <state>/<c>.kubeconfig per component
    <state>/state.json    ports and settings of the running cluster
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "COMPONENTS",
    "ENV_GPU_NODES",
    "ENV_KUEUE",
    "ENV_REAL_NODE",
    "ENV_REAL_NODES",
    "ENV_START_TIMEOUT",
    "ClusterConfig",
    "Ports",
    "free_ports",
]

# Start order; `down` stops them in reverse.
COMPONENTS: Final = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

ENV_GPU_NODES: Final = "HYPERFRAME_CLUSTER_GPU_NODES"
ENV_START_TIMEOUT: Final = "HYPERFRAME_CLUSTER_START_TIMEOUT"
ENV_REAL_NODE: Final = "HYPERFRAME_CLUSTER_REAL_NODE"
ENV_REAL_NODES: Final = "HYPERFRAME_CLUSTER_REAL_NODES"
ENV_KUEUE: Final = "HYPERFRAME_CLUSTER_KUEUE"
_MAX_REAL_NODES: Final = 4  # node_config.MAX_REAL_NODES (a test keeps them equal)
_BOOLEAN: Final = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False, "": False}


@dataclass(frozen=True, slots=True)
class Ports:
    """Loopback ports, picked free at `up` and recorded in state.json."""

    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int
    registry: int
    """The real node's local image registry (used only with the real node)."""
    kueue_webhook: int = 0
    """Kueue's webhook server (used only with Kueue)."""
    kueue_health: int = 0
    """Kueue's health probes (/readyz)."""


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports that are free right now."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """Settings of one local cluster."""

    state_dir: Path
    """Root of everything the cluster writes."""
    gpu_nodes: int = 4
    """Simulated GPU nodes (8 GPUs each, tainted `nvidia.com/gpu=present:NoSchedule`)."""
    system_nodes: int = 1
    """Simulated untainted CPU-only nodes, where non-GPU pods (e.g. a Deployment from a chart) run."""
    service_cidr: str = "10.96.0.0/16"
    pod_cidr: str = "10.244.0.0/16"
    start_timeout_s: float = 120.0
    """Per-component readiness timeout (generous: CI machines and shared laptops are slow)."""
    real_node: bool = False
    """Add the real node `hf-real-0` (containerd, kubelet, kube-proxy, CoreDNS) and a local registry."""
    real_nodes: int = 1
    """How many real nodes with `real_node`: hf-real-0 .. hf-real-<n-1>, each in a namespace of its
    own with its containerd, kubelet and kube-proxy; the registry and CoreDNS serve them all."""
    kueue: bool = False
    """Run the pinned Kueue controller (plain-pod integration) with its CRDs and webhooks."""
    die_with_parent: bool = False
    """Components get SIGTERM when the starting process dies (pytest sessions), not for `make cluster-up`."""

    def __post_init__(self) -> None:
        if self.gpu_nodes < 0 or self.system_nodes < 0:
            raise ValueError(
                f"gpu_nodes ({self.gpu_nodes}) and system_nodes ({self.system_nodes}) must be >= 0"
            )
        if not 1 <= self.real_nodes <= _MAX_REAL_NODES:
            raise ValueError(f"real_nodes ({self.real_nodes}) must be 1..{_MAX_REAL_NODES}")
        ipaddress.ip_network(self.service_cidr)
        ipaddress.ip_network(self.pod_cidr)

    @classmethod
    def from_env(cls, state_dir: Path, **overrides: object) -> ClusterConfig:
        """Defaults, overridden by $HYPERFRAME_CLUSTER_GPU_NODES, $HYPERFRAME_CLUSTER_START_TIMEOUT,
        $HYPERFRAME_CLUSTER_REAL_NODE, $HYPERFRAME_CLUSTER_REAL_NODES and $HYPERFRAME_CLUSTER_KUEUE.

        $HYPERFRAME_CLUSTER_REAL_NODES=N (0..4) is how many real nodes: alone it also turns them
        on (0: off); $HYPERFRAME_CLUSTER_REAL_NODE=0 turns them off whatever the count.
        """
        explicit = set(overrides)
        for env, key, kind in (
            (ENV_GPU_NODES, "gpu_nodes", int),
            (ENV_START_TIMEOUT, "start_timeout_s", float),
        ):
            raw = os.environ.get(env)
            if raw is None or key in overrides:
                continue
            try:
                overrides[key] = kind(raw)
            except ValueError:
                raise ValueError(f"{env}={raw!r}: expected a number") from None
        for env, key in ((ENV_REAL_NODE, "real_node"), (ENV_KUEUE, "kueue")):
            if key in overrides or os.environ.get(env) is None:
                continue
            raw = os.environ[env].strip().lower()
            if raw not in _BOOLEAN:
                raise ValueError(f"{env}={raw!r}: expected 1 or 0 (true/false, yes/no)")
            overrides[key] = _BOOLEAN[raw]
        raw_count = os.environ.get(ENV_REAL_NODES)
        if raw_count is not None and "real_nodes" not in explicit:
            try:
                count = int(raw_count)
            except ValueError:
                raise ValueError(f"{ENV_REAL_NODES}={raw_count!r}: expected 0..{_MAX_REAL_NODES}") from None
            if not 0 <= count <= _MAX_REAL_NODES:
                raise ValueError(f"{ENV_REAL_NODES}={raw_count!r}: expected 0..{_MAX_REAL_NODES}")
            if "real_node" not in explicit and (os.environ.get(ENV_REAL_NODE) is None or count == 0):
                overrides["real_node"] = count > 0
            overrides["real_nodes"] = max(count, 1)
        return cls(state_dir=state_dir, **overrides)  # type: ignore[arg-type]

    @classmethod
    def from_state(cls, state_dir: Path) -> ClusterConfig:
        """The settings recorded by the cluster running in `state_dir` (defaults if none is recorded)."""
        try:
            data = json.loads((state_dir / "state.json").read_text())
            return cls(
                state_dir=state_dir,
                gpu_nodes=int(data["gpu_nodes"]),
                system_nodes=int(data["system_nodes"]),
                real_node=bool(data.get("real_node", False)),
                real_nodes=int(data.get("real_nodes", 1)),
                kueue=bool(data.get("kueue", False)),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return cls(state_dir=state_dir)

    @property
    def service_ip(self) -> str:
        """The first service IP: the in-cluster address of the `kubernetes` Service."""
        return str(next(ipaddress.ip_network(self.service_cidr).hosts()))

    # --- layout ---------------------------------------------------------------------------
    @property
    def pki_dir(self) -> Path:
        return self.state_dir / "pki"

    @property
    def etcd_dir(self) -> Path:
        return self.state_dir / "etcd"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run"

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    def component_kubeconfig(self, component: str) -> Path:
        return self.state_dir / f"{component}.kubeconfig"

    def log_file(self, component: str) -> Path:
        return self.log_dir / f"{component}.log"

    def pid_file(self, component: str) -> Path:
        return self.run_dir / f"{component}.pid"

    # --- recorded state -------------------------------------------------------------------
    def write_state(self, ports: Ports) -> None:
        data = {
            "ports": asdict(ports),
            "gpu_nodes": self.gpu_nodes,
            "system_nodes": self.system_nodes,
            "real_node": self.real_node,
            "real_nodes": self.real_nodes,
            "kueue": self.kueue,
        }
        self.state_file.write_text(json.dumps(data, indent=2) + "\n")

    def read_ports(self) -> Ports | None:
        """The ports of the cluster recorded in this state directory, if any."""
        try:
            data = json.loads(self.state_file.read_text())
            return Ports(**data["ports"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
