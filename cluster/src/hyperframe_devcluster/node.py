"""The real nodes `hf-real-0`, `hf-real-1`, ...: set up, started and torn down beside the simulated ones.

Order at `up` (see node_config for the network picture):
  1. `prepare()` of every node before the apiserver starts: the network namespace, the veth
     pair and the namespace's own forwarding and firewall rules (the apiserver advertises
     hf-real-0's host side); then `connect_nodes()`: the link between the nodes' namespaces and
     the routes to each other's pods and node IPs;
  2. `start_registry()` (hf-real-0): Debian's docker-registry on the host, reachable from every
     node's namespace;
  3. `start()` of each node once the control plane serves: on hf-real-0 the cluster objects
     the nodes need (CoreDNS's RBAC, the kube-dns Service); the pause image, then containerd,
     the kubelet (waiting for the node to be Ready), kube-proxy and, on hf-real-0, CoreDNS.

`stop()` undoes all of it and is safe to call on a half-started or already stopped node: it
stops the daemons by pid, kills whatever still runs in the node's cgroups, removes those
cgroups, deletes the namespace (which takes the veth, the bridge, every iptables rule and
every pod network with it) and unmounts anything left under the state directory.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from . import node_config, oci, paths
from .components import kubeconfig_yaml
from .config import ClusterConfig
from .node_config import FABRIC_BRIDGE, NodeLayout, NodeNetwork
from .pki import Pki
from .probes import http_ok
from .process import log_tail
from .rest import ApiError, RestClient
from .supervisor import Supervisor

__all__ = ["NODE_COMPONENTS", "RealNode", "connect_nodes", "faults_host_path", "node_components"]

# hf-real-0's components, in start order; stop runs in reverse. The registry and CoreDNS serve
# every real node.
NODE_COMPONENTS: Final = ("registry", "containerd", "kubelet", "kube-proxy", "coredns")
_PER_NODE: Final = ("containerd", "kubelet", "kube-proxy")
_CGROUP_FS: Final = Path("/sys/fs/cgroup")
_CLUSTER_DOMAIN: Final = "cluster.local"


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(command), capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` failed ({result.returncode}): {result.stderr.strip()}")
    return result


def _host_networks() -> set[ipaddress.IPv4Network]:
    """Every IPv4 network with an address on a host interface (the veth pair must avoid them)."""
    out = _run("ip", "-4", "-o", "addr", "show").stdout
    networks: set[ipaddress.IPv4Network] = set()
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            networks.add(ipaddress.IPv4Interface(fields[fields.index("inet") + 1]).network)
    return networks


def node_components(index: int) -> tuple[str, ...]:
    """The components (pid and log file names) of real node `index`: hf-real-0's are unsuffixed."""
    if index == 0:
        return NODE_COMPONENTS
    return tuple(f"{c}-{index}" for c in _PER_NODE)


def faults_host_path(state_dir: Path) -> Path:
    """The host path at which every real node shows its own fault files to its pods.

    Each node's mount namespace binds its `NodeLayout.faults_dir` over this (empty) directory,
    so a pod with a hostPath volume here sees the files of the node it runs on.
    """
    return state_dir / "real-node-faults"


class RealNode:
    """One real node (`hf-real-<index>`), owned by the cluster in `config.state_dir`."""

    def __init__(self, config: ClusterConfig, pki: Pki, index: int = 0) -> None:
        self.config = config
        self.pki = pki
        self.index = index
        self.name = node_config.node_name(index)
        self.ident = node_config.node_id(config.state_dir)
        suffix = "" if index == 0 else f"-{index}"
        self.layout = NodeLayout(config.state_dir / f"node{suffix}")
        self.cgroup_root = f"/hyperframe-{self.ident}{suffix}"
        self._netns = f"hf-{self.ident}{suffix}"
        self._veth = f"hfv{self.ident}{suffix}"
        # hf-real-0 cleans up the whole state directory's mounts; its shims, like every node's,
        # name its own containerd socket under its layout root.
        self._mount_marker = str(config.state_dir) if index == 0 else str(self.layout.root)
        self._shim_marker = f"{self.layout.root}/"

    def component(self, base: str) -> str:
        """The pid/log name of this node's `base` component (containerd, kubelet, kube-proxy)."""
        return base if self.index == 0 else f"{base}-{self.index}"

    @property
    def components(self) -> tuple[str, ...]:
        return node_components(self.index)

    # --- recorded network -------------------------------------------------------------------
    @property
    def _network_file(self) -> Path:
        suffix = "" if self.index == 0 else f"-{self.index}"
        return self.config.state_dir / f"node{suffix}-network.json"

    def network(self) -> NodeNetwork | None:
        try:
            return NodeNetwork.from_json(json.loads(self._network_file.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def registry_address(self) -> str | None:
        """host:port of the local registry, as the host and pods name images."""
        try:
            return f"127.0.0.1:{json.loads(self._registry_file.read_text())['port']}"
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @property
    def _registry_file(self) -> Path:
        return self.config.state_dir / "registry.json"

    def pid(self, component: str) -> int | None:
        return Supervisor(self.config).pid(component)

    def running_components(self) -> list[str]:
        return [c for c in self.components if self.pid(c) is not None]

    # --- 1. network -------------------------------------------------------------------------
    def prepare(self, apiserver_ip: str | None = None) -> NodeNetwork:
        """Create the node's network namespace and veth pair; return the plan (host side first).

        `apiserver_ip`: the address the apiserver advertises (hf-real-0's host side; None for
        hf-real-0 itself), which this node's pods may reach besides their own host side.
        """
        self._delete_netns()
        net = node_config.plan_network(
            self.ident, self.config.service_cidr, _host_networks(), index=self.index
        )
        self._network_file.write_text(json.dumps(net.to_json(), indent=2) + "\n")
        peer = f"hfn{self.ident}" + ("" if self.index == 0 else f"-{self.index}")
        _run("ip", "netns", "add", net.netns)
        _run("ip", "link", "add", net.host_veth, "type", "veth", "peer", "name", peer)
        _run("ip", "link", "set", peer, "netns", net.netns)
        _run("ip", "addr", "add", f"{net.host_ip}/{net.prefix}", "dev", net.host_veth)
        _run("ip", "link", "set", net.host_veth, "up")
        inside = ("ip", "netns", "exec", net.netns)
        _run(*inside, "ip", "link", "set", "lo", "up")
        _run(*inside, "ip", "link", "set", peer, "name", "eth0")
        _run(*inside, "ip", "addr", "add", f"{net.node_ip}/{net.prefix}", "dev", "eth0")
        _run(*inside, "ip", "link", "set", "eth0", "up")
        _run(*inside, "ip", "route", "add", "default", "via", net.host_ip)
        # Namespace-local settings: the host's own ip_forward and iptables stay as they are.
        _run(*inside, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        _run(*inside, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1", check=False)
        # Pods reach the host side of the veth (API server, registry), masqueraded to the node
        # IP so the host needs no route back, and nothing beyond it: no egress.
        _run(*inside, "iptables", "-t", "nat", "-A", "POSTROUTING", "-s", net.pod_subnet, "-o", "eth0",
             "-j", "MASQUERADE")  # fmt: skip
        if apiserver_ip is not None and apiserver_ip != net.host_ip:
            _run(*inside, "iptables", "-A", "FORWARD", "-o", "eth0", "-d", f"{apiserver_ip}/32",
                 "-j", "ACCEPT")  # fmt: skip
        _run(*inside, "iptables", "-A", "FORWARD", "-o", "eth0", "!", "-d", f"{net.host_ip}/32",
             "-j", "DROP")  # fmt: skip
        return net

    # --- 2. registry ------------------------------------------------------------------------
    def start_registry(self, port: int) -> str:
        storage = self.config.state_dir / "registry"
        storage.mkdir(parents=True, exist_ok=True)
        self.layout.root.mkdir(parents=True, exist_ok=True)
        self.layout.registry_config.write_text(node_config.registry_config(storage, port))
        self._registry_file.write_text(json.dumps({"port": port}) + "\n")
        self._launch("registry", [_which("docker-registry"), "serve", str(self.layout.registry_config)])
        address = f"127.0.0.1:{port}"
        self._wait("registry", "/v2/", lambda: http_ok(f"http://{address}/v2/"))
        return address

    # --- 3. node ----------------------------------------------------------------------------
    def start(self, api: RestClient, apiserver_port: int, apiserver_ip: str | None = None) -> None:
        """Start the node's daemons; `apiserver_ip` as for `prepare` (None: this node's host side)."""
        net = self.network()
        registry = self.registry_address()
        if net is None or registry is None:
            raise RuntimeError("RealNode.start() before prepare() and start_registry()")
        layout = self.layout
        for directory in (layout.cni_conf_dir, layout.cni_data_dir, layout.pod_logs, layout.kubelet_root,
                          layout.containerd_socket.parent, layout.sysctl_dir, layout.faults_dir,
                          faults_host_path(self.config.state_dir)):  # fmt: skip
            directory.mkdir(parents=True, exist_ok=True)
        server = f"https://{apiserver_ip or net.host_ip}:{apiserver_port}"
        # The kubelet authenticates as its own node (NodeRestriction); the others share a user.
        kubelet_stem = "kubelet" if self.index == 0 else f"kubelet-{self.index}"
        kubeconfigs = {
            "kubelet": self._kubeconfig(self.component("kubelet"), kubelet_stem, server),
            "kube-proxy": self._kubeconfig(self.component("kube-proxy"), "kube-proxy", server),
        }
        if self.index == 0:
            kubeconfigs["coredns"] = self._kubeconfig("coredns", "coredns", server)
            self._cluster_objects(api, net)
        pause = self._push_pause(registry)

        port = int(registry.rsplit(":", 1)[1])
        layout.containerd_config.write_text(
            node_config.containerd_config(
                layout, net, registry_port=port, cni_bin_dir="/usr/lib/cni", pause_image=pause
            )
        )
        (layout.cni_conf_dir / "10-hyperframe.conflist").write_text(node_config.cni_conflist(layout, net))
        self._make_cgroup_root()
        containerd = self.component("containerd")
        self._launch(
            containerd, self._in_netns(net, ["containerd", "--config", str(layout.containerd_config)])
        )
        self._wait(containerd, "its socket", lambda: self._ctr("version").returncode == 0)

        layout.kubelet_config.write_text(
            node_config.kubelet_config(
                layout,
                net,
                ca_cert=self.pki.ca_cert,
                cgroup_root=self.cgroup_root,
                cluster_domain=_CLUSTER_DOMAIN,
            )
        )
        self.start_kubelet(api)

        layout.kube_proxy_config.write_text(
            node_config.kube_proxy_config(
                kubeconfigs["kube-proxy"], pod_cidr=self.config.pod_cidr, node=self.name
            )
        )
        proxy = [str(paths.binary("kube-proxy")), f"--config={layout.kube_proxy_config}", "--v=1"]
        self._launch(self.component("kube-proxy"), self._join(proxy))

        if self.index == 0:
            layout.corefile.write_text(
                node_config.corefile(net, kubeconfigs["coredns"], cluster_domain=_CLUSTER_DOMAIN)
            )
            self._launch("coredns", self._join([str(paths.binary("coredns")), "-conf", str(layout.corefile)]))
        self._wait(
            self.component("kube-proxy"),
            "its rules for the kube-dns Service",
            lambda: self._has_service_rule(net, net.dns_ip),
        )
        if self.index == 0:
            self._wait("coredns", "/ready", lambda: http_ok(f"http://{net.node_ip}:8181/ready"))

    def start_kubelet(self, api: RestClient) -> None:
        """(Re)start the kubelet (containerd running) and wait for the node to be Ready."""
        net = self.network()
        if net is None:
            raise RuntimeError(f"{self.name}: start_kubelet() before prepare()")
        layout = self.layout
        kubelet = [
            str(paths.binary("kubelet")),
            f"--config={layout.kubelet_config}",
            f"--kubeconfig={self.config.component_kubeconfig(self.component('kubelet'))}",
            f"--root-dir={layout.kubelet_root}",
            f"--cert-dir={layout.kubelet_root / 'pki'}",
            f"--hostname-override={self.name}",
            f"--node-ip={net.node_ip}",
            f"--node-labels={node_config.REAL_NODE_LABEL}=true",
            "--v=1",
        ]
        component = self.component("kubelet")
        self._launch(component, self._join(kubelet))
        self._wait(component, f"node {self.name} Ready", lambda: _node_ready(api, self.name))

    def stop_kubelet(self) -> bool:
        """Stop the kubelet alone (containerd and the containers keep running); True if it ran."""
        return Supervisor(self.config).stop(self.component("kubelet"))

    def kill_containers(self) -> int:
        """SIGKILL every process in the node's pod cgroups (its containers); return how many."""
        pids = self._cgroup_pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)

    def _kubeconfig(self, component: str, cert_stem: str, server: str) -> Path:
        path = self.config.component_kubeconfig(component)
        path.write_text(
            kubeconfig_yaml(
                server,
                self.pki.ca_cert,
                self.pki.client_cert(cert_stem),
                self.pki.client_key(cert_stem),
                cert_stem,
            )
        )
        path.chmod(0o600)
        return path

    def _cluster_objects(self, api: RestClient, net: NodeNetwork) -> None:
        """CoreDNS's read access and the kube-dns Service, pointing at CoreDNS on the node IP."""
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        _create(api, f"{rbac}/clusterroles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "hyperframe-dev:coredns"},
            "rules": [
                {"apiGroups": [""], "resources": ["services", "pods", "namespaces"], "verbs": ["list", "watch"]},
                {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
            ],
        })  # fmt: skip
        _create(api, f"{rbac}/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "hyperframe-dev:coredns"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "hyperframe-dev:coredns"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:coredns"}],
        })  # fmt: skip
        ports = [
            {"name": "dns", "port": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
        ]
        _create(api, "/api/v1/namespaces/kube-system/services", {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kube-dns", "labels": {"k8s-app": "kube-dns"}},
            "spec": {"clusterIP": net.dns_ip, "ports": [dict(p, targetPort=53) for p in ports]},
        })  # fmt: skip
        _create(api, "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices", {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"kube-dns-{self.name}", "labels": {
                "kubernetes.io/service-name": "kube-dns",
                "endpointslice.kubernetes.io/managed-by": "hyperframe-devcluster"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [net.node_ip], "conditions": {"ready": True}}],
            "ports": ports,
        })  # fmt: skip

    def _push_pause(self, registry: str) -> str:
        pause = paths.binary("pause")
        layer = oci.file_layer(self.layout.root / "pause-layer.tar", {"pause": (pause.read_bytes(), 0o755)})
        image = oci.OciImage(layers=[layer], entrypoint=["/pause"], user="65535:65535")
        tag = paths.pins().kubernetes
        digest = oci.push(registry, node_config.PAUSE_IMAGE_REPO, tag, image)
        return f"{registry}/{node_config.PAUSE_IMAGE_REPO}:{tag}@{digest}"

    def _make_cgroup_root(self) -> None:
        """The kubelet's --cgroup-root in every v1 hierarchy (cpuset needs its cpus and mems filled)."""
        for hierarchy in _hierarchies():
            path = hierarchy / self.cgroup_root.lstrip("/")
            path.mkdir(exist_ok=True)
            if (hierarchy / "cpuset.cpus").exists():
                for name in ("cpuset.cpus", "cpuset.mems"):
                    (path / name).write_text((hierarchy / name).read_text())

    def _in_netns(self, net: NodeNetwork, command: list[str]) -> list[str]:
        """Run `command` in the node's network namespace and a private mount namespace of its own.

        In the new mount namespace (private propagation: nothing mounted there reaches the host)
        /sys is mounted again so that it shows the node's network devices, with the host's
        cgroup mounts moved back under it, and the kubelet's host-wide sysctls are shadowed by
        files holding the host's current values, so the kubelet never changes them on the host.
        """
        stage = self.layout.root / "cgroup-stage"
        stage.mkdir(parents=True, exist_ok=True)
        steps = [
            f"mount --rbind /sys/fs/cgroup {stage}",
            "mount -t sysfs sysfs /sys",
            f"mount --move {stage} /sys/fs/cgroup",
            f"mount --bind {self.layout.faults_dir} {faults_host_path(self.config.state_dir)}",
        ]
        for entry in node_config.KUBELET_PROTECTED_SYSCTLS:
            shadow = self.layout.sysctl_dir / entry.replace("/", ".")
            shadow.write_text(Path("/proc/sys", entry).read_text())
            steps.append(f"mount --bind {shadow} /proc/sys/{entry}")
        script = " && ".join([*steps, 'exec "$@"'])
        return [
            "nsenter", f"--net=/run/netns/{net.netns}", "--",
            "unshare", "--mount", "--propagation", "private", "--",
            "/bin/sh", "-c", script, "sh", *command,
        ]  # fmt: skip

    def _join(self, command: list[str]) -> list[str]:
        """Run `command` in containerd's network and mount namespaces (the kubelet must see its mounts)."""
        pid = self.pid(self.component("containerd"))
        if pid is None:
            raise RuntimeError(f"{self.name}: containerd is not running")
        return ["nsenter", f"--target={pid}", "--mount", "--net", "--", *command]

    def _ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _run("ctr", f"--address={self.layout.containerd_socket}", *args, check=False)

    def _has_service_rule(self, net: NodeNetwork, ip: str) -> bool:
        result = _run("ip", "netns", "exec", net.netns, "iptables-save", "-t", "nat", check=False)
        return f"-d {ip}/32" in result.stdout

    # --- processes --------------------------------------------------------------------------
    def _launch(self, component: str, command: list[str]) -> None:
        Supervisor(self.config).launch(component, command)

    def _wait(self, component: str, what: str, ready: Callable[[], bool]) -> None:
        Supervisor(self.config).wait(component, what, ready)

    def log_tails(self, lines: int = 30) -> dict[str, str]:
        return {c: log_tail(self.config.log_file(c), lines) for c in self.components}

    # --- teardown ---------------------------------------------------------------------------
    def stop(self) -> list[str]:
        """Stop and remove everything of this node; return the daemons that were running."""
        stopped = []
        supervisor = Supervisor(self.config)
        daemons = ["coredns"] if self.index == 0 else []
        for component in [*daemons, self.component("kube-proxy"), self.component("kubelet")]:
            if supervisor.stop(component):
                stopped.append(component)
        self._kill_cgroup_processes()
        if supervisor.stop(self.component("containerd")):
            stopped.append(self.component("containerd"))
        self._kill_leftovers()
        self._kill_cgroup_processes()
        self._remove_cgroups()
        self._delete_netns()
        if self.index == 0:
            if supervisor.stop("registry"):
                stopped.append("registry")
            self._registry_file.unlink(missing_ok=True)
        self._unmount_state()
        self._network_file.unlink(missing_ok=True)
        return list(reversed(stopped))

    def cgroup_dirs(self) -> list[Path]:
        """This node's cgroup directories that exist (empty after `stop`)."""
        return [
            h / self.cgroup_root.lstrip("/")
            for h in _hierarchies()
            if (h / self.cgroup_root.lstrip("/")).exists()
        ]

    def _kill_cgroup_processes(self) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            pids = self._cgroup_pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)

    def _cgroup_pids(self) -> set[int]:
        pids: set[int] = set()
        for root in self.cgroup_dirs():
            # os.walk skips directories that vanish while it walks (runc removes a container's
            # cgroups as the container exits); Path.rglob raises instead.
            for directory, _, files in os.walk(root):
                if "cgroup.procs" in files:
                    with contextlib.suppress(OSError, ValueError):
                        pids.update(int(line) for line in Path(directory, "cgroup.procs").read_text().split())
        return pids

    def _kill_leftovers(self) -> None:
        """containerd shims whose command line names this cluster's state directory (their socket)."""
        me = os.getpid()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == me:
                continue
            with contextlib.suppress(OSError):
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if self._shim_marker in cmdline and "containerd-shim" in cmdline:
                    os.kill(int(proc.name), signal.SIGKILL)

    def _remove_cgroups(self) -> None:
        for root in self.cgroup_dirs():
            for directory, _, _ in os.walk(root, topdown=False):  # deepest first; root last
                with contextlib.suppress(OSError):
                    Path(directory).rmdir()

    def _delete_netns(self) -> None:
        if Path("/run/netns", self._netns).exists():
            _run("ip", "netns", "delete", self._netns, check=False)
        if Path("/sys/class/net", self._veth).exists():
            _run("ip", "link", "delete", self._veth, check=False)

    def _unmount_state(self) -> None:
        """Unmount anything the host still sees under the state directory (normally nothing)."""
        for point in sorted(_mount_points(self._mount_marker), key=len, reverse=True):
            _run("umount", "-l", point, check=False)


def connect_nodes(nets: list[NodeNetwork]) -> None:
    """Link the real nodes' namespaces and route each node's pods and node IP to the others.

    A bridge in hf-real-0's namespace (`FABRIC_BRIDGE`) carries one veth from each other node
    (`eth1` there). Pod traffic between nodes is routed, not masqueraded, so pods see each
    other's real addresses, as with any flat pod network; Service traffic is DNATed by the
    sending node's kube-proxy and then routed the same way. The host never forwards anything.
    """
    if len(nets) < 2:
        return
    first, prefix = nets[0], node_config.fabric_prefix()
    _run("ip", "-n", first.netns, "link", "add", FABRIC_BRIDGE, "type", "bridge")
    _run("ip", "-n", first.netns, "addr", "add", f"{first.fabric_ip}/{prefix}", "dev", FABRIC_BRIDGE)
    _run("ip", "-n", first.netns, "link", "set", FABRIC_BRIDGE, "up")
    for index, net in enumerate(nets[1:], start=1):
        port = f"hff{index}"
        _run("ip", "-n", first.netns, "link", "add", port, "type", "veth", "peer", "name", "eth1",
             "netns", net.netns)  # fmt: skip
        _run("ip", "-n", first.netns, "link", "set", port, "master", FABRIC_BRIDGE, "up")
        _run("ip", "-n", net.netns, "addr", "add", f"{net.fabric_ip}/{prefix}", "dev", "eth1")
        _run("ip", "-n", net.netns, "link", "set", "eth1", "up")
    for net in nets:
        for other in nets:
            if other is net:
                continue
            for destination in (other.pod_subnet, f"{other.node_ip}/32"):
                _run("ip", "-n", net.netns, "route", "add", destination, "via", other.fabric_ip)


def _hierarchies() -> list[Path]:
    if not _CGROUP_FS.is_dir():
        return []
    return [p for p in _CGROUP_FS.iterdir() if p.is_dir() and (p / "cgroup.procs").exists()]


def _mount_points(prefix: str) -> list[str]:
    points = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4]
            if point.startswith(prefix):
                points.append(point)
    return points


def _which(command: str) -> str:
    found = shutil.which(command)
    if found is None:
        raise RuntimeError(f"{command} is not installed")
    return found


def _create(api: RestClient, path: str, obj: dict[str, object]) -> None:
    try:
        api.create(path, obj)
    except ApiError as error:
        if error.status != 409:
            raise


def _node_ready(api: RestClient, name: str) -> bool:
    try:
        node = api.get(f"/api/v1/nodes/{name}")
    except ApiError:
        return False
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", [])
    )
