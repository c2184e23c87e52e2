"""Command lines and kubeconfigs of the control-plane components (pure: no processes started).

Flag choices that matter:
- every component binds to 127.0.0.1 only, on ports picked free at `up`;
- etcd runs with `--unsafe-no-fsync`: a throw-away test cluster does not need durable writes,
  and fsync dominates etcd latency on CI disks;
- controller-manager and scheduler run with `--leader-elect=false`: there is one of each, and a
  restart would otherwise wait out the previous holder's lease (15 s);
- kube-apiserver uses `Node,RBAC` authorization and the default admission chain (which includes
  ServiceAccount, DefaultTolerationSeconds, ResourceQuota, Priority and the webhooks) plus
  NodeRestriction, like a kubeadm cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .config import ClusterConfig, Ports
from .pki import Pki

__all__ = [
    "KWOK_MANAGE_ANNOTATION",
    "SERVICE_ACCOUNT_ISSUER",
    "apiserver_command",
    "controller_manager_command",
    "etcd_command",
    "kubeconfig_yaml",
    "kwok_command",
    "scheduler_command",
]

SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# Nodes carrying this annotation are simulated by the KWOK controller (and no others).
KWOK_MANAGE_ANNOTATION = "kwok.x-k8s.io/node=fake"


def etcd_command(binary: Path, cfg: ClusterConfig, ports: Ports) -> list[str]:
    client = f"http://127.0.0.1:{ports.etcd_client}"
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    return [
        str(binary),
        "--name=hyperframe",
        f"--data-dir={cfg.etcd_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=hyperframe={peer}",
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def apiserver_command(
    binary: Path, cfg: ClusterConfig, ports: Ports, pki: Pki, *, node_host_ip: str | None = None
) -> list[str]:
    """Loopback only; with the real node (`node_host_ip`, the host side of its veth) also reachable
    from pods: the `kubernetes` Service points at that address, and logs/exec reach the kubelet."""
    if node_host_ip is None:
        network = [
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # The `kubernetes` Service cannot point at a loopback address; nothing in-cluster
            # could reach it anyway (pods are simulated).
            "--endpoint-reconciler-type=none",
        ]
    else:
        network = [
            # One bind address serves both the host's clients (127.0.0.1) and the node's pods.
            "--bind-address=0.0.0.0",
            f"--advertise-address={node_host_ip}",
            "--endpoint-reconciler-type=lease",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            f"--kubelet-client-certificate={pki.client_cert('apiserver-kubelet-client')}",
            f"--kubelet-client-key={pki.client_key('apiserver-kubelet-client')}",
        ]
    return [
        str(binary),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        *network,
        f"--secure-port={ports.apiserver}",
        f"--cert-dir={cfg.pki_dir / 'apiserver-generated'}",
        f"--tls-cert-file={pki.apiserver_cert}",
        f"--tls-private-key-file={pki.apiserver_key}",
        f"--client-ca-file={pki.ca_cert}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        f"--service-cluster-ip-range={cfg.service_cidr}",
        "--allow-privileged=true",
        "--profiling=false",
        "--v=1",
    ]


def _control_loop_flags(name: str, cfg: ClusterConfig, secure_port: int) -> list[str]:
    """What kube-controller-manager and kube-scheduler share: their identity and a loopback port."""
    kubeconfig = cfg.component_kubeconfig(name)
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={secure_port}",
        f"--cert-dir={cfg.pki_dir / f'{name}-generated'}",
        "--leader-elect=false",
    ]


def controller_manager_command(binary: Path, cfg: ClusterConfig, ports: Ports, pki: Pki) -> list[str]:
    return [
        str(binary),
        *_control_loop_flags("kube-controller-manager", cfg, ports.controller_manager),
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca_cert}",
        f"--cluster-signing-cert-file={pki.ca_cert}",
        f"--cluster-signing-key-file={pki.ca_key}",
        f"--service-cluster-ip-range={cfg.service_cidr}",
        # Every default controller: garbage collector, namespace, serviceaccount(-token), job,
        # replicaset, deployment, node-lifecycle, ... (bootstrap-signer/token-cleaner stay off).
        "--controllers=*",
        "--profiling=false",
        "--v=1",
    ]


def scheduler_command(binary: Path, cfg: ClusterConfig, ports: Ports) -> list[str]:
    return [
        str(binary),
        *_control_loop_flags("kube-scheduler", cfg, ports.scheduler),
        "--profiling=false",
        "--v=1",
    ]


def kwok_command(binary: Path, cfg: ClusterConfig, ports: Ports) -> list[str]:
    return [
        str(binary),
        # An explicit (empty) config keeps a developer's ~/.kwok/kwok.yaml out of the cluster.
        "--config=/dev/null",
        f"--kubeconfig={cfg.component_kubeconfig('kwok')}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_MANAGE_ANNOTATION}",
        # Stages are API objects (the project's own, installed at `up`), so tests can add
        # and remove faults at run time.
        "--enable-crds=Stage",
        "--node-lease-duration-seconds=40",
        f"--cidr={cfg.pod_cidr}",
        f"--server-address=127.0.0.1:{ports.kwok}",
    ]


def kubeconfig_yaml(server: str, ca_cert: Path, client_cert: Path, client_key: Path, user: str) -> str:
    """A kubeconfig with one cluster/user/context named `hyperframe-local`."""
    name = "hyperframe-local"
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority": str(ca_cert)}}],
        "users": [
            {"name": user, "user": {"client-certificate": str(client_cert), "client-key": str(client_key)}}
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "current-context": name,
    }
    return yaml.safe_dump(config, sort_keys=False)
