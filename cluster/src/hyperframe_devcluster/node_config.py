"""The real nodes' network plan and the configuration files of their components (pure: no I/O).

A real node (`hf-real-0`, and `hf-real-1` ... where a cluster asks for more) runs containerd, the kubelet, kube-proxy and CoreDNS on this
machine, inside a network namespace that the cluster creates (`hf-<id>`) and a private mount
namespace. Everything the node changes therefore lives in namespaces that `down` deletes:

    host                                   node network namespace hf-<id>
    ----                                   ------------------------------
    kube-apiserver  0.0.0.0:<port>         containerd, kubelet, kube-proxy, CoreDNS
    registry        0.0.0.0:<port>         eth0  <node_ip>/30  (default route: <host_ip>)
    hfv<id>  <host_ip>/30  <--- veth --->  cni0  <pod gateway>/24  --- pods (bridge CNI)

Pods reach the API server and the registry at `<host_ip>` (masqueraded to the node IP, so the
host needs no route back and keeps ip_forward off) and nothing beyond it: the node namespace
drops forwarded traffic to any other address, so pods have no egress. The host's iptables,
sysctls and links are never touched except for the one veth, which disappears with the
namespace. Further nodes are the same, with their own names, veth, pod subnet
(10.244.(255 - i).0/24) and an address on a link between the namespaces (a bridge in hf-real-0's
namespace), over which every node routes the others' pod subnets and node IPs.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

__all__ = [
    "FABRIC_BRIDGE",
    "KUBELET_PROTECTED_SYSCTLS",
    "MAX_REAL_NODES",
    "NODE_NAME",
    "REAL_NODE_LABEL",
    "REAL_NODE_TAINT",
    "NodeLayout",
    "NodeNetwork",
    "cni_conflist",
    "containerd_config",
    "corefile",
    "fabric_prefix",
    "kube_proxy_config",
    "kubelet_config",
    "node_id",
    "node_name",
    "plan_network",
]

NODE_NAME: Final = "hf-real-0"
"""The first real node (the only one unless a cluster asks for more)."""
MAX_REAL_NODES: Final = 4
REAL_NODE_LABEL: Final = "hyperframe.dev/real-node"
# Pods must opt in (a toleration): the simulated CPU node keeps serving everything else, so a
# chart installed with images that exist only in production never lands on the real node.
REAL_NODE_TAINT: Final = {"key": REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"}
PAUSE_IMAGE_REPO: Final = "hyperframe-dev/pause"
# The kubelet writes these host-wide sysctls at start; the node's mount namespace shadows them
# with files that hold the host's current values, so the host is left as it was.
KUBELET_PROTECTED_SYSCTLS: Final = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")

_VETH_SUPERNET: Final = ipaddress.IPv4Network("10.200.0.0/16")
# Node i's pods: 10.244.(255 - i).0/24, inside the cluster's pod CIDR and far from KWOK's
# simulated pod IPs, which are allocated from the bottom of that CIDR.
_POD_SUBNETS: Final = ipaddress.IPv4Network("10.244.0.0/16")
# The link between the real nodes' namespaces: a bridge in hf-real-0's namespace, one veth from
# every other node. It exists only inside those namespaces, so it can never clash with the host.
_FABRIC: Final = ipaddress.IPv4Network("10.201.0.0/24")
FABRIC_BRIDGE: Final = "hfnet"


def node_name(index: int) -> str:
    """`hf-real-<index>`."""
    if not 0 <= index < MAX_REAL_NODES:
        raise ValueError(f"real node index {index}: use 0..{MAX_REAL_NODES - 1}")
    return f"hf-real-{index}"


def _suffix(index: int) -> str:
    return "" if index == 0 else f"-{index}"


def node_id(state_dir: Path) -> str:
    """A short stable id for the cluster in `state_dir`: names its namespace, veth and cgroups."""
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:8]


@dataclass(frozen=True, slots=True)
class NodeNetwork:
    """Addresses and names of one real node's network (recorded in state.json)."""

    name: str
    """The Kubernetes node name, hf-real-<index>."""
    netns: str
    host_veth: str
    host_ip: str
    node_ip: str
    prefix: int
    pod_subnet: str
    dns_ip: str
    fabric_ip: str
    """This node's address on the link between the real nodes (FABRIC_BRIDGE in hf-real-0's
    namespace, `eth1` in the others)."""

    @property
    def fabric_device(self) -> str:
        return FABRIC_BRIDGE if self.name == NODE_NAME else "eth1"

    @property
    def pod_gateway(self) -> str:
        return str(next(ipaddress.ip_network(self.pod_subnet).hosts()))

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NodeNetwork:
        return cls(**{name: data[name] for name in cls.__slots__})


def plan_network(
    ident: str, service_cidr: str, used: set[ipaddress.IPv4Network], *, index: int = 0
) -> NodeNetwork:
    """Pick a /30 for the veth pair that no host address uses, starting from one keyed by `ident`.

    `index` is the real node's number: it names the namespace and veth (`hf-<ident>-<index>`,
    none for 0) and picks the node's pod subnet and fabric address.
    """
    name = node_name(index)
    pod_subnet = list(_POD_SUBNETS.subnets(new_prefix=24))[-1 - index]
    slots = list(_VETH_SUPERNET.subnets(new_prefix=30))
    start = int(ident, 16) % len(slots)
    for offset in range(len(slots)):
        subnet = slots[(start + offset) % len(slots)]
        if any(subnet.overlaps(other) for other in used):
            continue
        host_ip, node_ip = list(subnet.hosts())
        services = ipaddress.ip_network(service_cidr)
        return NodeNetwork(
            name=name,
            netns=f"hf-{ident}{_suffix(index)}",
            host_veth=f"hfv{ident}{_suffix(index)}",
            host_ip=str(host_ip),
            node_ip=str(node_ip),
            prefix=30,
            pod_subnet=str(pod_subnet),
            dns_ip=str(services.network_address + 10),
            fabric_ip=str(_FABRIC.network_address + 1 + index),
        )
    raise RuntimeError(f"no free /30 left in {_VETH_SUPERNET} for the real node's veth pair")


@dataclass(frozen=True, slots=True)
class NodeLayout:
    """Where the real node keeps its files, all under `<state>/node/`."""

    root: Path

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.root / "containerd" / "state"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd.toml"

    @property
    def containerd_socket(self) -> Path:
        return self.root / "run" / "containerd.sock"

    @property
    def runc_root(self) -> Path:
        return self.root / "runc"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_data_dir(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet.yaml"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def kube_proxy_config(self) -> Path:
        return self.root / "kube-proxy.yaml"

    @property
    def corefile(self) -> Path:
        return self.root / "Corefile"

    @property
    def sysctl_dir(self) -> Path:
        return self.root / "sysctl"

    @property
    def registry_config(self) -> Path:
        return self.root / "registry.yaml"

    @property
    def faults_dir(self) -> Path:
        """This node's fault files (node_faults.py), seen by its pods at the shared hostPath."""
        return self.root / "faults"


def _toml_value(value: object) -> str:
    # JSON strings, numbers, booleans and arrays are valid TOML values.
    return json.dumps(value)


def containerd_config(
    layout: NodeLayout, net: NodeNetwork, *, registry_port: int, cni_bin_dir: str, pause_image: str
) -> str:
    """containerd 1.6 configuration (version 2): private socket, root and state; CRI for the kubelet."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    mirror = f"127.0.0.1:{registry_port}"
    lines = [
        "version = 2",
        f"root = {_toml_value(str(layout.containerd_root))}",
        f"state = {_toml_value(str(layout.containerd_state))}",
        "disabled_plugins = "
        + _toml_value(
            [
                "io.containerd.snapshotter.v1.aufs",
                "io.containerd.snapshotter.v1.btrfs",
                "io.containerd.snapshotter.v1.devmapper",
                "io.containerd.snapshotter.v1.zfs",
                "io.containerd.tracing.processor.v1.otlp",
                "io.containerd.internal.v1.tracing",
            ]
        ),
        "",
        "[grpc]",
        f"  address = {_toml_value(str(layout.containerd_socket))}",
        "[ttrpc]",
        f"  address = {_toml_value(str(layout.containerd_socket) + '.ttrpc')}",
        "[debug]",
        '  address = ""',
        "",
        f"[{cri}]",
        f"  sandbox_image = {_toml_value(pause_image)}",
        # No CAP_SYS_RESOURCE here: negative OOM scores would make runc fail in this sandbox.
        "  restrict_oom_score_adj = true",
        "  netns_mounts_under_state_dir = true",
        '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "0"',
        "  enable_selinux = false",
        f"[{cri}.containerd]",
        '  snapshotter = "overlayfs"',
        '  default_runtime_name = "runc"',
        f"[{cri}.containerd.runtimes.runc]",
        '  runtime_type = "io.containerd.runc.v2"',
        f"[{cri}.containerd.runtimes.runc.options]",
        "  SystemdCgroup = false",
        f"  Root = {_toml_value(str(layout.runc_root))}",
        f"[{cri}.cni]",
        f"  bin_dir = {_toml_value(cni_bin_dir)}",
        f"  conf_dir = {_toml_value(str(layout.cni_conf_dir))}",
        "  max_conf_num = 1",
        # Pods name images as 127.0.0.1:<port>/... (as the host pushes them); inside the node's
        # namespace that address is the host side of the veth.
        f'[{cri}.registry.mirrors."{mirror}"]',
        f"  endpoint = {_toml_value([f'http://{net.host_ip}:{registry_port}'])}",
        "",
    ]
    return "\n".join(lines)


def cni_conflist(layout: NodeLayout, net: NodeNetwork) -> str:
    """Bridge networking without egress: pods talk to each other, the node and the host side of the veth."""
    conf = {
        "cniVersion": "1.0.0",
        "name": "hyperframe",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(layout.cni_data_dir),
                    "ranges": [[{"subnet": net.pod_subnet, "gateway": net.pod_gateway}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(conf, indent=2) + "\n"


def kubelet_config(
    layout: NodeLayout, net: NodeNetwork, *, ca_cert: Path, cgroup_root: str, cluster_domain: str
) -> str:
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_cert)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        # cgroup v1 here, and containerd 1.6 cannot report its cgroup driver.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "oomScoreAdj": 0,
        "failSwapOn": False,
        "clusterDNS": [net.dns_ip],
        "clusterDomain": cluster_domain,
        # No host search domains or upstream servers leak into pods.
        "resolvConf": "",
        "podLogsDir": str(layout.pod_logs),
        "readOnlyPort": 0,
        "serializeImagePulls": False,
        # Images come from the local registry only; never collect them behind a test's back.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "protectKernelDefaults": False,
        "registerWithTaints": [dict(REAL_NODE_TAINT)],
        "maxPods": 110,
        "shutdownGracePeriod": "0s",
    }
    return yaml.safe_dump(config, sort_keys=False)


def fabric_prefix() -> int:
    return _FABRIC.prefixlen


def kube_proxy_config(kubeconfig: Path, *, pod_cidr: str, node: str = NODE_NAME) -> str:
    """iptables mode, leaving every host-wide conntrack sysctl alone (the host is shared)."""
    config: dict[str, Any] = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node,
        "mode": "iptables",
        "clusterCIDR": pod_cidr,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
            "udpTimeout": "0s",
            "udpStreamTimeout": "0s",
        },
        "iptables": {"localhostNodePorts": False, "minSyncPeriod": "0s", "syncPeriod": "30s"},
    }
    return yaml.safe_dump(config, sort_keys=False)


def corefile(net: NodeNetwork, kubeconfig: Path, *, cluster_domain: str) -> str:
    """Cluster DNS only: no upstream resolver (pods have no egress)."""
    return (
        ".:53 {\n"
        f"    bind {net.node_ip}\n"
        "    errors\n"
        f"    ready {net.node_ip}:8181\n"
        f"    kubernetes {cluster_domain} in-addr.arpa ip6.arpa {{\n"
        f"        kubeconfig {kubeconfig} hyperframe-local\n"
        "        pods insecure\n"
        "        ttl 5\n"
        "    }\n"
        "    cache 5\n"
        "}\n"
    )


def registry_config(storage: Path, port: int) -> str:
    """Debian's docker-registry (distribution 2.8): plain HTTP, reachable from the node's namespace."""
    config: dict[str, Any] = {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(storage)}, "delete": {"enabled": True}},
        "http": {"addr": f"0.0.0.0:{port}"},
    }
    return yaml.safe_dump(config, sort_keys=False)
