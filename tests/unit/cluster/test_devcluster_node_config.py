"""The real node's network plan and component configuration (pure: no namespace is created).

Covers: the veth /30 avoiding every host network, names short enough for Linux interfaces,
containerd's private paths and the registry mirror, the kubelet settings that keep the host as
it was (no negative OOM scores, cgroup root of its own, no host resolv.conf), kube-proxy leaving
conntrack sysctls alone, CoreDNS serving only the cluster domain on the node IP, and each further
real node's own names, pod subnet and address on the link between the nodes.
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest
import yaml
from hyperframe_devcluster import node_config
from hyperframe_devcluster.node_config import NodeLayout

LAYOUT = NodeLayout(Path("/state/node"))


def _net(used: set[ipaddress.IPv4Network] | None = None) -> node_config.NodeNetwork:
    return node_config.plan_network("0000abcd", "10.96.0.0/16", used or set())


def test_the_veth_pair_gets_a_slash_30_that_no_host_address_uses() -> None:
    first = _net()
    taken = ipaddress.ip_network(f"{first.host_ip}/30", strict=False)

    second = _net({taken})

    assert ipaddress.ip_address(second.host_ip) not in taken
    assert ipaddress.ip_network(f"{second.host_ip}/30", strict=False).overlaps(taken) is False
    assert ipaddress.ip_address(second.node_ip) in ipaddress.ip_network(f"{second.host_ip}/30", strict=False)


def test_names_fit_linux_interface_names_and_the_dns_ip_is_the_tenth_service_ip() -> None:
    net = _net()
    assert len(net.host_veth) <= 15
    assert net.netns == "hf-0000abcd"
    assert net.dns_ip == "10.96.0.10"
    assert node_config.NodeNetwork.from_json(json.loads(json.dumps(net.to_json()))) == net


def test_node_id_is_stable_per_state_dir_and_differs_between_clusters(tmp_path: Path) -> None:
    assert node_config.node_id(tmp_path / "a") == node_config.node_id(tmp_path / "a")
    assert node_config.node_id(tmp_path / "a") != node_config.node_id(tmp_path / "b")


def test_containerd_keeps_everything_under_the_state_dir_and_pulls_the_local_registry_through_the_veth() -> (
    None
):
    net = _net()
    text = node_config.containerd_config(
        LAYOUT, net, registry_port=5123, cni_bin_dir="/usr/lib/cni", pause_image="127.0.0.1:5123/p@sha256:1"
    )

    assert 'root = "/state/node/containerd/root"' in text
    assert 'address = "/state/node/run/containerd.sock"' in text
    assert "restrict_oom_score_adj = true" in text
    assert '[plugins."io.containerd.grpc.v1.cri".registry.mirrors."127.0.0.1:5123"]' in text
    assert f'endpoint = ["http://{net.host_ip}:5123"]' in text
    assert 'sandbox_image = "127.0.0.1:5123/p@sha256:1"' in text


def test_the_kubelet_keeps_to_its_own_cgroup_root_and_never_asks_for_negative_oom_scores() -> None:
    net = _net()
    config = yaml.safe_load(
        node_config.kubelet_config(
            LAYOUT, net, ca_cert=Path("/ca.crt"), cgroup_root="/hyperframe-x", cluster_domain="cluster.local"
        )
    )

    assert config["cgroupRoot"] == "/hyperframe-x"
    assert config["oomScoreAdj"] == 0
    assert config["failCgroupV1"] is False
    assert config["resolvConf"] == ""
    assert config["clusterDNS"] == ["10.96.0.10"]
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["authorization"]["mode"] == "Webhook"
    assert config["registerWithTaints"] == [node_config.REAL_NODE_TAINT]
    assert config["podLogsDir"] == "/state/node/pod-logs"


def test_kube_proxy_leaves_conntrack_sysctls_and_localhost_nodeports_alone() -> None:
    config = yaml.safe_load(node_config.kube_proxy_config(Path("/kp.kubeconfig"), pod_cidr="10.244.0.0/16"))

    assert config["mode"] == "iptables"
    assert config["conntrack"]["maxPerCore"] == 0
    assert config["conntrack"]["min"] == 0
    assert config["iptables"]["localhostNodePorts"] is False
    assert config["hostnameOverride"] == node_config.NODE_NAME


def test_pods_get_bridge_networking_without_masquerade_and_ipam_state_under_the_state_dir() -> None:
    conf = json.loads(node_config.cni_conflist(LAYOUT, _net()))
    bridge = conf["plugins"][0]

    assert bridge["type"] == "bridge"
    assert bridge["ipMasq"] is False
    assert bridge["ipam"]["dataDir"] == "/state/node/cni/ipam"


def test_coredns_serves_the_cluster_domain_on_the_node_ip_with_no_upstream() -> None:
    net = _net()
    text = node_config.corefile(net, Path("/coredns.kubeconfig"), cluster_domain="cluster.local")

    assert f"bind {net.node_ip}" in text
    assert "kubernetes cluster.local in-addr.arpa ip6.arpa" in text
    assert "forward" not in text


def test_each_real_node_gets_its_own_names_pod_subnet_and_fabric_address() -> None:
    first = _net()
    second = node_config.plan_network(
        "0000abcd", "10.96.0.0/16", {ipaddress.ip_network(f"{first.host_ip}/30", strict=False)}, index=1
    )

    assert (first.name, second.name) == ("hf-real-0", "hf-real-1")
    assert (first.netns, second.netns) == ("hf-0000abcd", "hf-0000abcd-1")
    assert len(second.host_veth) <= 15 and second.host_veth != first.host_veth
    assert not ipaddress.ip_network(first.pod_subnet).overlaps(ipaddress.ip_network(second.pod_subnet))
    pods = ipaddress.ip_network("10.244.0.0/16")
    assert ipaddress.ip_network(second.pod_subnet).subnet_of(pods)
    assert first.fabric_ip != second.fabric_ip
    assert (first.fabric_device, second.fabric_device) == (node_config.FABRIC_BRIDGE, "eth1")
    assert first.dns_ip == second.dns_ip


def test_kube_proxy_names_the_node_it_serves() -> None:
    config = yaml.safe_load(
        node_config.kube_proxy_config(Path("/kp.kubeconfig"), pod_cidr="10.244.0.0/16", node="hf-real-1")
    )
    assert config["hostnameOverride"] == "hf-real-1"


def test_real_node_indices_are_bounded() -> None:
    last = node_config.MAX_REAL_NODES - 1
    assert node_config.node_name(last) == f"hf-real-{last}"
    with pytest.raises(ValueError, match="real node index"):
        node_config.node_name(node_config.MAX_REAL_NODES)
