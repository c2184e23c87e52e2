"""Command lines and kubeconfigs of the control-plane components (no processes started).

Covers: every command names the state directory (the pid-file identity check relies on it),
the security-relevant apiserver/controller-manager flags, KWOK's isolation flags, and the
kubeconfig shape kubectl and helm consume.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from hyperframe_devcluster import components
from hyperframe_devcluster.config import ClusterConfig, Ports
from hyperframe_devcluster.pki import Pki

CFG = ClusterConfig(state_dir=Path("/state/dir"))
PORTS = Ports(
    etcd_client=2379,
    etcd_peer=2380,
    apiserver=6443,
    controller_manager=10257,
    scheduler=10259,
    kwok=10247,
    registry=5000,
)
PKI = Pki(CFG.pki_dir)
BIN = Path("/bin/x")


def all_commands() -> dict[str, list[str]]:
    return {
        "etcd": components.etcd_command(BIN, CFG, PORTS),
        "kube-apiserver": components.apiserver_command(BIN, CFG, PORTS, PKI),
        "kube-controller-manager": components.controller_manager_command(BIN, CFG, PORTS, PKI),
        "kube-scheduler": components.scheduler_command(BIN, CFG, PORTS),
        "kwok": components.kwok_command(BIN, CFG, PORTS),
    }


def test_every_command_names_the_state_dir_so_pid_files_can_be_verified() -> None:
    for name, command in all_commands().items():
        assert any(str(CFG.state_dir) in arg for arg in command), name


def test_every_component_listens_on_loopback_only() -> None:
    joined = " ".join(" ".join(c) for c in all_commands().values())
    assert "0.0.0.0" not in joined
    assert "--bind-address=127.0.0.1" in components.apiserver_command(BIN, CFG, PORTS, PKI)
    assert "--endpoint-reconciler-type=none" in components.apiserver_command(BIN, CFG, PORTS, PKI)


def test_with_the_real_node_the_kubernetes_service_points_at_the_host_side_of_its_veth() -> None:
    flags = components.apiserver_command(BIN, CFG, PORTS, PKI, node_host_ip="10.200.3.1")

    assert "--advertise-address=10.200.3.1" in flags
    assert "--endpoint-reconciler-type=lease" in flags
    # logs/exec: the apiserver dials the kubelet at the node IP with its own client certificate.
    assert "--kubelet-preferred-address-types=InternalIP,Hostname" in flags
    assert f"--kubelet-client-certificate={PKI.client_cert('apiserver-kubelet-client')}" in flags


def test_apiserver_serves_tls_with_rbac_and_service_account_keys() -> None:
    flags = set(components.apiserver_command(BIN, CFG, PORTS, PKI))

    assert "--authorization-mode=Node,RBAC" in flags
    assert f"--client-ca-file={PKI.ca_cert}" in flags
    assert f"--tls-cert-file={PKI.apiserver_cert}" in flags
    assert f"--service-account-signing-key-file={PKI.sa_key}" in flags
    assert f"--service-account-key-file={PKI.sa_pub}" in flags
    assert "--service-cluster-ip-range=10.96.0.0/16" in flags
    assert "--etcd-servers=http://127.0.0.1:2379" in flags


def test_controller_manager_runs_every_default_controller_with_per_controller_credentials() -> None:
    flags = set(components.controller_manager_command(BIN, CFG, PORTS, PKI))

    assert "--controllers=*" in flags
    assert "--use-service-account-credentials=true" in flags
    assert f"--service-account-private-key-file={PKI.sa_key}" in flags
    assert f"--root-ca-file={PKI.ca_cert}" in flags


def test_kwok_manages_only_annotated_nodes_with_api_stages_and_no_user_config() -> None:
    flags = set(components.kwok_command(BIN, CFG, PORTS))

    assert "--manage-all-nodes=false" in flags
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in flags
    assert "--enable-crds=Stage" in flags
    assert "--config=/dev/null" in flags


def test_kubeconfig_has_one_current_context_with_client_certificates() -> None:
    text = components.kubeconfig_yaml(
        "https://127.0.0.1:6443", PKI.ca_cert, Path("/c.crt"), Path("/c.key"), user="me"
    )
    config = yaml.safe_load(text)

    assert config["current-context"] == "hyperframe-local"
    assert config["clusters"][0]["cluster"] == {
        "server": "https://127.0.0.1:6443",
        "certificate-authority": str(PKI.ca_cert),
    }
    assert config["users"][0] == {
        "name": "me",
        "user": {"client-certificate": "/c.crt", "client-key": "/c.key"},
    }
